"""Train the bundled Tiny Shakespeare model: a GPT-2-shaped model small enough to ship
(<= 16 MB in float16) that shows a previous-token head, an induction head, in-context copying and an
attention sink, with a held-out loss <= 4.6 nats/token.

Standalone on purpose: from the package it imports only top-level public names (GPTConfig,
GPTModel, load_tokenizer, save_checkpoint); the data pipeline, the learning-rate schedule and the
measurements (bundled_metrics.py) are written here.

Data mix (every choice a function of (seed, step), so a resumed run draws the same batches):
  * natural windows: ``block + 1`` consecutive tokens of the first 90% of Tiny Shakespeare, at a
    uniformly random start (the last 10% is never read during training except for evaluation);
  * ``--p-random`` of the rows: synthetic "repeated random tokens": an optional <|endoftext|> (half
    of them), then a run of L ~ U[8, 96] distinct tokens drawn from the ``--pool`` most frequent
    training tokens, repeated until the window is full. The loss is taken only where copying can
    predict the target (from the second copy's second token on): the first copy is noise by design
    and would only teach the model a flat distribution over the pool;
  * ``--p-span`` of the rows: "repeated Shakespeare": a training span of L ~ U[16, 128] tokens, the
    same span again, then the text that follows it, all scored.
  Why: induction heads need repeated sequences to form, and 300K tokens of verse repeat little
  beyond names and stock phrases, so they form late or not at all in a short run; a small share of
  explicit repeats makes them form reliably and early (they then also help on real text, where
  names and phrases recur). The random runs mirror TransformerLens's induction test, <|endoftext|>
  first included.

Schedule: AdamW (betas 0.9/0.95, weight decay on matrices and the tied embedding only), linear
warm-up then cosine decay to ``--min-lr``; gradient clipping at 1.0; dropout ``--dropout``.
Early stopping: every evaluation measures the full held-out loss; the best one is saved as
``best.safetensors`` (via save_checkpoint), and the run stops after ``--patience`` evaluations without
improvement.

Resuming: ``state.pt`` (model, optimizer, RNG states, step, history; tensors and plain types only,
so it loads with ``weights_only=True``) is written every ``--save-every-s`` seconds and at every
evaluation; re-running the same command continues from it (a different set of arguments is refused).

    setsid nohup nice -n 5 python tools/bundled/train_bundled.py --out /work/runs/bundled-v2 ... &
    python tools/bundled/train_bundled.py --bench 20 ...   # seconds per step, nothing written
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("PLAYGROUND_ACCEL", "off")  # no timing-based layout choices: same numbers every run

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import bundled_metrics as bm  # noqa: E402
from bundled_batches import IGNORE, Batches, step_seed  # noqa: E402
from bundled_head_loss import ChunkedHeadLoss, HeadVocab  # noqa: E402
from head_shaping import HeadShaper, parse_head  # noqa: E402

from playground import GPTConfig, GPTModel, load_tokenizer, save_checkpoint  # noqa: E402

DEFAULT_DATA = str(ROOT.parent / "shared" / "data" / "tinyshakespeare.txt")

# Arguments that may differ between the original run and a resume without changing the result.
RESUME_FREE = {"out", "data", "bench", "save_every_s", "threads", "max_minutes"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="/work/runs/bundled-v2")
    p.add_argument("--data", default=DEFAULT_DATA)
    # model
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--emb", type=int, default=128)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.1)
    # optimisation
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr", type=float, default=2e-4)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast for the forward (weights stay float32)")
    p.add_argument(
        "--chunked-head", type=int, default=1, help="1: output head + loss in 128-row chunks (ChunkedHeadLoss)"
    )
    p.add_argument("--bf16-head", action="store_true", help="with --chunked-head: head products in bfloat16")
    p.add_argument(
        "--head-vocab",
        choices=("full", "train"),
        default="full",
        help="train: the training loss's softmax runs over the tokens the training texts contain (plus "
        "<|endoftext|> and a fresh sample of the others) instead of all 50257 (see HeadVocab)",
    )
    p.add_argument(
        "--full-head-from",
        type=int,
        default=0,
        help="with --head-vocab train: the full softmax from this step (0: never)",
    )
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--init", default=None, help="start from this checkpoint's weights (a second training stage)")
    p.add_argument(
        "--pos-init",
        choices=("normal", "sinusoid"),
        default="normal",
        help="sinusoid: the learned position table starts as the sinusoidal table times --pos-scale",
    )
    p.add_argument("--pos-scale", type=float, default=0.25)
    p.add_argument("--pos-wd", type=float, default=None, help="weight decay of the position table (default: --wd)")
    p.add_argument("--extra", default=None, help="a second text for natural windows (the bundled Pride and Prejudice)")
    p.add_argument("--p-extra", type=float, default=0.0, help="share of rows drawn from --extra")
    p.add_argument(
        "--shape-prev",
        default=None,
        help="LAYER,HEAD: keep this head's attention on the previous token (head_shaping.py)",
    )
    p.add_argument("--shape-sink", default=None, help="LAYER,HEAD: keep this head's attention on the first token")
    p.add_argument(
        "--shape-induction",
        default=None,
        help="LAYER,HEAD: make this head the induction head: its attention on the copy above a floor, "
        "every other head of layers 1.. below a ceiling there (head_shaping.py)",
    )
    p.add_argument("--shape-induction-floor", type=float, default=0.7)
    p.add_argument("--shape-induction-ceiling", type=float, default=0.1)
    p.add_argument("--shape-prev-floor", type=float, default=0.7)
    p.add_argument("--shape-sink-floor", type=float, default=0.5)
    p.add_argument("--shape-weight", type=float, default=1.0)
    # data mix
    p.add_argument("--p-random", type=float, default=0.06)
    p.add_argument("--p-span", type=float, default=0.06)
    p.add_argument("--p-lines", type=float, default=0.0, help="share of rows: whole training lines said twice")
    p.add_argument("--pool", type=int, default=5000, help="random tokens are drawn from this many most frequent")
    p.add_argument(
        "--switch-step", type=int, default=0, help="from this step on, use --p-random2 / --p-span2 (0: never)"
    )
    p.add_argument("--p-random2", type=float, default=None)
    p.add_argument("--p-span2", type=float, default=None)
    # bookkeeping
    p.add_argument("--eval-every", type=int, default=150)
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--patience", type=int, default=6, help="evaluations without a new best val loss before stopping")
    p.add_argument("--save-every-s", type=float, default=480.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--max-minutes",
        type=float,
        default=0,
        help="stop (after saving) once this much wall time has passed; 0 = no limit",
    )
    p.add_argument(
        "--bench", type=int, default=0, help="time this many steps (after 3 warm-up steps), print s/step, write nothing"
    )
    return p.parse_args(argv)


def lr_at(step: int, a) -> float:
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    progress = min(1.0, (step - a.warmup) / max(1, a.steps - 1 - a.warmup))
    return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (a.lr - a.min_lr)


def build(a) -> tuple[GPTModel, torch.optim.Optimizer]:
    cfg = GPTConfig(
        vocab_size=50257,
        context_length=a.context,
        emb_dim=a.emb,
        n_heads=a.heads,
        n_layers=a.layers,
        drop_rate=a.dropout,
        qkv_bias=True,
        tie_weights=True,
        pos_encoding="learned",
        activation="gelu_tanh",
        norm_placement="pre",
    )
    model = GPTModel(cfg, generator=torch.Generator().manual_seed(a.seed))
    if a.pos_init == "sinusoid":
        # Positions the attention can tell apart from the first step: a sinusoidal table (relative
        # offsets are rotations of it, so "the previous token" is one linear map away), at a scale a
        # trained token embedding does not drown out. It stays learned.
        T, d = cfg.context_length, cfg.emb_dim
        pos = torch.arange(T, dtype=torch.float32)[:, None]
        freq = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
        table = torch.zeros(T, d)
        table[:, 0::2], table[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
        with torch.no_grad():
            model.pos_emb.weight.copy_(table * a.pos_scale)
    if a.init:
        # A second stage starts from an earlier run's weights (same shape) with a fresh optimizer and
        # schedule: the recipe is then that run's command followed by this one.
        from playground import load_checkpoint

        start = load_checkpoint(a.init, max_bytes=None)
        if start.cfg.replace(drop_rate=a.dropout) != cfg:
            raise SystemExit(f"--init {a.init} has another shape: {start.cfg} (this run: {cfg})")
        model.load_state_dict(start.state_dict())
    pos = model.pos_emb.weight
    decay = [p for p in model.parameters() if p.dim() >= 2 and p is not pos]  # matrices and the tied embedding
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # biases, LayerNorm scale/shift
    pos_wd = a.wd if a.pos_wd is None else a.pos_wd
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": a.wd},
            {"params": no_decay, "weight_decay": 0.0},
            {"params": [pos], "weight_decay": pos_wd},
        ],
        lr=a.lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    return model, opt


def train_step(
    model, opt, batches, step, a, head_vocab: HeadVocab | None = None, shaper: HeadShaper | None = None
) -> tuple[float, float, str]:
    lr = lr_at(step, a)
    for g in opt.param_groups:
        g["lr"] = lr
    x, y, kinds = batches(step)
    if shaper:
        shaper.periods = batches.periods
    model.train()
    torch.manual_seed(step_seed(a.seed, step, 1))  # dropout masks: a function of (seed, step)
    if a.chunked_head:
        with bm.hidden_states(model), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            h = model(x)
        W, h = model.tok_emb.weight, h.float()
        if head_vocab is not None and not (a.full_head_from and step >= a.full_head_from):
            gen = torch.Generator().manual_seed(step_seed(a.seed, step, 2))
            (h, W), y = head_vocab.head(W, h, gen), head_vocab.targets(y)
        loss = ChunkedHeadLoss.apply(h.flatten(0, 1), W, y.flatten(), a.bf16_head)
    else:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), ignore_index=IGNORE)
    if not math.isfinite(float(loss.detach())):
        raise FloatingPointError(f"loss {float(loss)} at step {step}")
    total = loss
    if shaper:
        total = loss + a.shape_weight * shaper.loss()
        kinds += " " + " ".join(f"{k} {v:.2f}" for k, v in shaper.last.items())
    opt.zero_grad(set_to_none=True)
    total.backward()
    gnorm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip))
    opt.step()
    return float(loss.detach()), gnorm, kinds


def atomic_torch_save(obj, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def log(out: Path, line: str) -> None:
    stamp = time.strftime("%H:%M:%S", time.gmtime())
    with open(out / "log.txt", "a") as f:
        f.write(f"{stamp} {line}\n")
    print(f"{stamp} {line}", flush=True)


def main(argv=None) -> int:
    a = parse_args(argv)
    if a.switch_step and (a.p_random2 is None or a.p_span2 is None):
        raise SystemExit("--switch-step needs --p-random2 and --p-span2")
    torch.set_num_threads(a.threads)
    train_ids, val_ids = bm.load_split(a.data)
    extra_ids = None
    if a.extra:
        extra_ids = torch.tensor(load_tokenizer().encode(Path(a.extra).read_text(encoding="utf-8")), dtype=torch.long)
    batches = Batches(train_ids, a, extra_ids)
    head_vocab = None
    if a.head_vocab == "train":
        if not a.chunked_head:
            raise SystemExit("--head-vocab train needs --chunked-head 1")
        head_vocab = HeadVocab(train_ids, *([] if extra_ids is None else [extra_ids]))
        print(f"training softmax over {len(head_vocab.ids):,} of 50257 tokens", flush=True)
    model, opt = build(a)
    shaper = HeadShaper(
        model,
        parse_head(a.shape_prev),
        parse_head(a.shape_sink),
        a.shape_prev_floor,
        a.shape_sink_floor,
        parse_head(a.shape_induction),
        a.shape_induction_floor,
        a.shape_induction_ceiling,
    )
    n_params = sum(p.numel() for p in model.parameters())

    if a.bench:
        for s in range(3):
            train_step(model, opt, batches, s, a, head_vocab, shaper)
        t0 = time.perf_counter()
        for s in range(3, 3 + a.bench):
            train_step(model, opt, batches, s, a, head_vocab, shaper)
        dt = (time.perf_counter() - t0) / a.bench
        print(
            json.dumps(
                {
                    "layers": a.layers,
                    "heads": a.heads,
                    "emb": a.emb,
                    "batch": a.batch,
                    "bf16": a.bf16,
                    "chunked_head": a.chunked_head,
                    "bf16_head": a.bf16_head,
                    "params": n_params,
                    "s_per_step": round(dt, 3),
                    "tokens_per_s": round(a.batch * a.context / dt),
                }
            ),
            flush=True,
        )
        return 0

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    args_path, state_path = out / "args.json", out / "state.pt"
    keyed = {k: v for k, v in vars(a).items() if k not in RESUME_FREE}
    step, best, history, evals_since_best, wall = 0, None, [], 0, 0.0
    if state_path.exists():
        saved_args = json.loads(args_path.read_text())
        # Options added after a run was written count as their defaults in it.
        defaults = {k: v for k, v in vars(parse_args([])).items() if k not in RESUME_FREE}
        saved = defaults | {k: v for k, v in saved_args.items() if k not in RESUME_FREE}
        if saved != keyed:
            diff = {k: (saved.get(k), keyed.get(k)) for k in set(saved) | set(keyed) if saved.get(k) != keyed.get(k)}
            raise SystemExit(f"{state_path} was written with other arguments: {diff}")
        state = torch.load(state_path, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        step, best, history = state["step"], state["best"], state["history"]
        evals_since_best, wall = state["evals_since_best"], state["wall_s"]
        log(out, f"resumed from {state_path} at step {step} (best val {best and best['val_loss']})")
        if step >= a.steps or evals_since_best >= a.patience:
            log(out, "nothing to do: this run already finished (or stopped early); best.safetensors is its result")
            return 0
    else:
        args_path.write_text(json.dumps(vars(a), indent=2, sort_keys=True) + "\n")
        log(
            out,
            f"start: {n_params:,} parameters, config {model.cfg.to_json()}, args {json.dumps(vars(a), sort_keys=True)}",
        )

    def save_state():
        atomic_torch_save(
            {
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "step": step,
                "best": best,
                "history": history,
                "evals_since_best": evals_since_best,
                "wall_s": wall,
                "args": keyed,
            },
            state_path,
        )

    def evaluate():
        nonlocal best, evals_since_best
        t0 = time.perf_counter()
        m = bm.all_metrics(model, train_ids, val_ids, a.context, train_windows=16)
        m.update(
            step=step, tokens=step * a.batch * a.context, wall_s=round(wall), eval_s=round(time.perf_counter() - t0, 1)
        )
        with open(out / "evals.jsonl", "a") as f:
            f.write(json.dumps(m) + "\n")
        improved = best is None or m["val_loss"] < best["val_loss"]
        if improved:
            best = {
                k: m[k]
                for k in (
                    "step",
                    "val_loss",
                    "train_loss",
                    "prev_token",
                    "first_token",
                    "induction",
                    "copy_gap_random",
                    "copy_gap_text",
                )
            }
            evals_since_best = 0
            save_checkpoint(
                model,
                out / "best.safetensors",
                metadata={
                    "step": step,
                    "tokens_seen": step * a.batch * a.context,
                    "val_loss": m["val_loss"],
                    "train_args": vars(a),
                    "metrics": {k: v for k, v in m.items() if k != "per_head"},
                },
            )
        else:
            evals_since_best += 1
        # Every evaluation's weights too: the heads can form after the best held-out loss.
        save_checkpoint(model, out / f"step{step:05d}.safetensors", metadata={"step": step, "val_loss": m["val_loss"]})
        pt, ft, ind = m["prev_token"], m["first_token"], m["induction"]
        log(
            out,
            f"eval step {step} | val {m['val_loss']:.4f} train {m['train_loss']:.4f} | "
            f"prev {pt['score']:.3f} (L{pt['layer']}H{pt['head']}) sink {ft['score']:.3f} (L{ft['layer']}H{ft['head']}) "
            f"induction {ind['score']:.3f} (L{ind['layer']}H{ind['head']}) | copy gap random {m['copy_gap_random']:.2f} "
            f"text {m['copy_gap_text']:.2f} (text {m['copy_text']['first']:.2f}->{m['copy_text']['second']:.2f}) | "
            f"{'BEST' if improved else f'no gain x{evals_since_best}'} | eval {m['eval_s']} s",
        )
        return m

    if step == 0:
        evaluate()
        save_state()
    last_save = time.perf_counter()
    started = time.perf_counter()
    window = []
    while step < a.steps:
        t0 = time.perf_counter()
        loss, gnorm, kinds = train_step(model, opt, batches, step, a, head_vocab, shaper)
        step += 1
        dt = time.perf_counter() - t0
        wall += dt
        window.append((loss, dt))
        history.append([step, round(loss, 4)])
        if step % a.log_every == 0:
            mean_loss = sum(x for x, _ in window) / len(window)
            mean_dt = sum(d for _, d in window) / len(window)
            log(
                out,
                f"step {step}/{a.steps} | loss {mean_loss:.4f} | lr {lr_at(step - 1, a):.2e} | "
                f"grad {gnorm:.2f} | {mean_dt:.2f} s/step | last rows {kinds}",
            )
            window = []
        stop = False
        if step % a.eval_every == 0 or step == a.steps:
            evaluate()
            save_state()
            last_save = time.perf_counter()
            if evals_since_best >= a.patience:
                log(
                    out,
                    f"early stop: {a.patience} evaluations without a better val loss (best {best['val_loss']} at step {best['step']})",
                )
                stop = True
        elif time.perf_counter() - last_save > a.save_every_s:
            save_state()
            last_save = time.perf_counter()
        if a.max_minutes and time.perf_counter() - started > 60 * a.max_minutes:
            save_state()
            log(out, f"stopping after {a.max_minutes} minutes at step {step} (re-run to continue)")
            return 0
        if stop:
            break
    save_state()
    log(out, f"done at step {step}: best val {best['val_loss']} at step {best['step']}")
    (out / "DONE").write_text(json.dumps(best) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
