"""Activation, path and attribution patching against an independent computation: transformers'
GPT2LMHeadModel with torch forward hooks, one full forward per cell, on a random GPT-2 small and on the
bundled model. Every expectation is computed here, live (the bundled weights may be retrained)."""

import pytest
import torch

from playground.engine.hf_gpt2 import config_from_hf, convert_gpt2_state
from playground.engine.model import GPTModel
from playground.engine.weight_layout import LoadReport
from playground.inside import patching, patching_paths
from tests.helpers import ROOT

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow

BUNDLED = ROOT / "playground" / "assets" / "bundled"
TOL = 1e-4


def ours_from_hf(hf) -> GPTModel:
    cfg = config_from_hf(hf.config.to_dict())
    model = GPTModel(cfg)
    state = convert_gpt2_state(hf.state_dict(), cfg, LoadReport())
    model.load_state_dict(state, strict=False)
    return model.eval()


@pytest.fixture(scope="module")
def random_small():
    torch.manual_seed(37)
    # GPT-2 small's shape; a wider init than GPT-2's 0.02 so that the logits are not all alike
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(initializer_range=0.05, attn_implementation="eager"))
    return hf.eval(), ours_from_hf(hf)


@pytest.fixture(scope="module")
def bundled():
    if not (BUNDLED / "model.safetensors").is_file():
        pytest.skip("no bundled model in this copy")
    hf = transformers.GPT2LMHeadModel.from_pretrained(str(BUNDLED), dtype=torch.float32, attn_implementation="eager")
    hf = hf.eval()
    return hf, ours_from_hf(hf)


# ----------------------------------------------------------------------------------------------
# The reference: plain HF forwards with hooks that read or overwrite one activation


class HFRef:
    def __init__(self, hf, clean, corrupted):
        self.hf, self.clean, self.corrupted = hf, clean, corrupted
        cfg = hf.config
        self.L, self.H, self.hd = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head
        self.clean_acts = self.capture(clean)

    def blocks(self):
        return self.hf.transformer.h

    def capture(self, ids):
        acts = {"resid_pre": {}, "z": {}, "mlp_out": {}}
        handles = []
        for i, block in enumerate(self.blocks()):
            handles.append(block.register_forward_pre_hook(self._keep(acts["resid_pre"], i), with_kwargs=True))
            handles.append(block.attn.c_proj.register_forward_pre_hook(self._keep(acts["z"], i), with_kwargs=True))
            handles.append(block.mlp.register_forward_hook(lambda m, a, out, i=i: acts["mlp_out"].__setitem__(i, out)))
        try:
            with torch.no_grad():
                self.hf(torch.tensor([ids]))
        finally:
            for h in handles:
                h.remove()
        return acts

    @staticmethod
    def _keep(store, i):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            store[i] = x.detach().clone()

        return hook

    def logit_diff(self, answer, wrong, handles=()):
        try:
            with torch.no_grad():
                logits = self.hf(torch.tensor([self.corrupted])).logits[0, -1].double()
        finally:
            for h in handles:
                h.remove()
        return float(logits[answer] - logits[wrong])

    def patched(self, target, layer, pos, head, answer, wrong):
        """One forward of the corrupted prompt with one activation from the clean run."""
        block, clean = self.blocks()[layer], self.clean_acts
        hd = self.hd
        sel = slice(None) if pos is None else pos
        if target == "resid_pre":

            def pre(module, args, kwargs):
                x = (args[0] if args else kwargs["hidden_states"]).clone()
                x[:, sel] = clean["resid_pre"][layer][:, sel]
                return ((x,) + tuple(args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": x})

            handle = block.register_forward_pre_hook(pre, with_kwargs=True)
        elif target == "mlp_out":

            def post(module, args, out):
                out = out.clone()
                out[:, sel] = clean["mlp_out"][layer][:, sel]
                return out

            handle = block.mlp.register_forward_hook(post)
        else:

            def pre_proj(module, args):
                z = args[0].clone()
                z[:, sel, head * hd : (head + 1) * hd] = clean["z"][layer][:, sel, head * hd : (head + 1) * hd]
                return (z,)

            handle = block.attn.c_proj.register_forward_pre_hook(pre_proj)
        return self.logit_diff(answer, wrong, [handle])

    def path(self, sender, receiver, via, answer, wrong):
        """The receiver head's q/k/v slice of c_attn, recomputed from the corrupted block input plus
        the sender's c_proj-written difference (clean − corrupted)."""
        corrupt = self.capture(self.corrupted)
        senders = sender if isinstance(sender, list) else [sender]  # a list: their writes summed
        rl, rh = receiver
        hd, d = self.hd, self.hf.config.n_embd

        def written(z, sl, sh):
            only = torch.zeros_like(z)
            only[..., sh * hd : (sh + 1) * hd] = z[..., sh * hd : (sh + 1) * hd]
            return self.blocks()[sl].attn.c_proj(only)

        with torch.no_grad():
            delta = sum(
                written(self.clean_acts["z"][sl], sl, sh) - written(corrupt["z"][sl], sl, sh) for sl, sh in senders
            )
            rblock = self.blocks()[rl]
            alt = rblock.attn.c_attn(rblock.ln_1(corrupt["resid_pre"][rl] + delta))  # (1, T, 3d)
        col = "qkv".index(via) * d + rh * hd

        def post(module, args, out):
            out = out.clone()
            out[..., col : col + hd] = alt[..., col : col + hd]
            return out

        return self.logit_diff(answer, wrong, [rblock.attn.c_attn.register_forward_hook(post)])


def pick_tokens(hf, clean, corrupted):
    """The clean run's top token as the answer, the corrupted run's as the wrong one (second if equal)."""
    with torch.no_grad():
        a = hf(torch.tensor([clean])).logits[0, -1].topk(2).indices.tolist()
        b = hf(torch.tensor([corrupted])).logits[0, -1].topk(2).indices.tolist()
    return a[0], (b[0] if b[0] != a[0] else b[1])


def expected_grid(ref, target, cfg, T, answer, wrong, layer=None):
    with torch.no_grad():
        lc = ref.hf(torch.tensor([ref.clean])).logits[0, -1].double()
    clean_ld = float(lc[answer] - lc[wrong])
    corr_ld = ref.logit_diff(answer, wrong)
    norm = lambda ld: (ld - corr_ld) / (clean_ld - corr_ld)
    L, H = cfg.n_layers, cfg.n_heads
    if target == "attn_head":
        return [[norm(ref.patched(target, lay, None, h, answer, wrong)) for h in range(H)] for lay in range(L)]
    if target == "attn_head_pos":
        return [[norm(ref.patched(target, layer, p, h, answer, wrong)) for p in range(T)] for h in range(H)]
    return [[norm(ref.patched(target, lay, p, None, answer, wrong)) for p in range(T)] for lay in range(L)]


def assert_close(got, want, tol=TOL):
    g, w = torch.tensor(got, dtype=torch.float64), torch.tensor(want, dtype=torch.float64)
    assert g.shape == w.shape
    assert (g - w).abs().max().item() <= tol, (g - w).abs().max().item()


def random_pair(T=6, seed=3):
    g = torch.Generator().manual_seed(seed)
    clean = torch.randint(0, 50257, (T,), generator=g).tolist()
    corrupted = list(clean)
    corrupted[1] = (clean[1] + 17) % 50257
    return clean, corrupted


BUNDLED_CLEAN = "When Mary and John went to the store, John gave a drink to"
BUNDLED_CORRUPT = "When Mary and John went to the store, Mary gave a drink to"


def bundled_pair(hf):
    from playground.engine.tokenizer import load_tokenizer

    tok = load_tokenizer()
    clean, corrupted = tok.encode(BUNDLED_CLEAN), tok.encode(BUNDLED_CORRUPT)
    assert len(clean) == len(corrupted)
    return clean, corrupted


@pytest.mark.parametrize("which", ["random_small", "bundled"])
@pytest.mark.parametrize("target", patching.TARGETS)
def test_every_target_matches_hf_hooks(which, target, request):
    hf, ours = request.getfixturevalue(which)
    clean, corrupted = random_pair() if which == "random_small" else bundled_pair(hf)
    answer, wrong = pick_tokens(hf, clean, corrupted)
    layer = ours.cfg.n_layers // 2
    got = patching.activation_patching(ours, clean, corrupted, answer, wrong, target, layer=layer)
    ref = HFRef(hf, clean, corrupted)
    want = expected_grid(ref, target, ours.cfg, len(clean), answer, wrong, layer)
    assert_close(got["values"], want)
    with torch.no_grad():
        lc = hf(torch.tensor([clean])).logits[0, -1]
    assert got["clean_logit_diff"] == pytest.approx(float(lc[answer] - lc[wrong]), abs=TOL)
    rows, cols = len(want), len(want[0])
    assert (len(got["rows"]), len(got["columns"])) == (rows, cols)


@pytest.mark.parametrize("which", ["random_small", "bundled"])
@pytest.mark.parametrize("via", patching_paths.INPUTS)
def test_path_patching_matches_hf_hooks(which, via, request):
    hf, ours = request.getfixturevalue(which)
    clean, corrupted = random_pair() if which == "random_small" else bundled_pair(hf)
    answer, wrong = pick_tokens(hf, clean, corrupted)
    sender, receiver = (0, 2), (1, 3)
    pair = patching.check_pair(ours, clean, corrupted, answer, wrong)
    got = patching_paths.path_patching(ours, pair, sender, receiver, via)
    ref = HFRef(hf, clean, corrupted)
    with torch.no_grad():
        lc = hf(torch.tensor([clean])).logits[0, -1].double()
    clean_ld, corr_ld = float(lc[answer] - lc[wrong]), ref.logit_diff(answer, wrong)
    norm = lambda ld: (ld - corr_ld) / (clean_ld - corr_ld)
    want = norm(ref.path(sender, receiver, via, answer, wrong))
    assert got["value"] == pytest.approx(want, abs=TOL)
    assert got["by_input"][via] == pytest.approx(want, abs=TOL)
    # another receiver of the grid, in the last layer
    last = ours.cfg.n_layers - 1
    want_last = norm(ref.path(sender, (last, 0), via, answer, wrong))
    assert got["values"][last][0] == pytest.approx(want_last, abs=TOL)
    assert got["values"][0] == [None] * ours.cfg.n_heads  # the sender's layer and before: no receivers


def test_the_lesson_step_on_the_induction_circuit_matches_hf_hooks(bundled):
    """Lesson 4's path-patching step on the bundled model: the found previous-token head's output into
    the found induction head's key, and all of its layer's heads at once, as HF hooks measure them."""
    from playground.engine.tokenizer import load_tokenizer
    from playground.server import lessons

    hf, ours = bundled
    tok = load_tokenizer()
    step = next(s for lesson in lessons.lessons() for s in lesson.steps if s.question == "path_patching_key")
    q, _ = lessons.ask(step, ours, "ROMEO:\nBut soft, what light through yonder window breaks? It is the east")
    patch = q.target["patch"]
    clean, corrupted = tok.encode(patch["clean"]), tok.encode(patch["corrupted"])
    answer, wrong = (tok.encode(patch[key].replace("\\n", "\n"))[0] for key in ("answer", "wrong"))
    sender, receiver = (tuple(int(x) for x in patch[key].split(".")) for key in ("sender", "receiver"))
    ref = HFRef(hf, clean, corrupted)
    with torch.no_grad():
        lc = hf(torch.tensor([clean])).logits[0, -1].double()
    clean_ld, corr_ld = float(lc[answer] - lc[wrong]), ref.logit_diff(answer, wrong)
    norm = lambda ld: (ld - corr_ld) / (clean_ld - corr_ld)
    k = q.view["values"]["k"]
    assert k[sender[1]] == pytest.approx(norm(ref.path(sender, receiver, "k", answer, wrong)), abs=TOL)
    layer = [(sender[0], h) for h in range(ours.cfg.n_heads)]
    assert k[-1] == pytest.approx(norm(ref.path(layer, receiver, "k", answer, wrong)), abs=TOL)
    assert q.answer == ("0-25", "25-50", "50-75", "75-100")[min(3, max(0, int(k[sender[1]] * 4)))]


def hf_attribution(hf, clean, corrupted, answer, wrong, target, layer):
    """The definition: (clean − corrupted activation) · ∂(normalised metric)/∂activation, at the corrupted run."""
    ref = HFRef(hf, clean, corrupted)
    clean_acts = ref.clean_acts
    with torch.no_grad():
        lc = hf(torch.tensor([clean])).logits[0, -1].double()
    clean_ld, corr_ld = float(lc[answer] - lc[wrong]), ref.logit_diff(answer, wrong)
    acts, handles = {}, []
    key = {"resid_pre": "resid_pre", "mlp_out": "mlp_out"}.get(target, "z")
    for i, block in enumerate(hf.transformer.h):
        if key == "resid_pre":

            def pre(m, args, kwargs, i=i):
                x = args[0] if args else kwargs["hidden_states"]
                x.retain_grad()
                acts[i] = x

            handles.append(block.register_forward_pre_hook(pre, with_kwargs=True))
        elif key == "z":

            def pre_z(m, args, i=i):
                args[0].retain_grad()
                acts[i] = args[0]

            handles.append(block.attn.c_proj.register_forward_pre_hook(pre_z))
        else:

            def post(m, args, out, i=i):
                out.retain_grad()
                acts[i] = out

            handles.append(block.mlp.register_forward_hook(post))
    try:
        logits = hf(torch.tensor([corrupted])).logits[0, -1].double()
        metric = (logits[answer] - logits[wrong] - corr_ld) / (clean_ld - corr_ld)
        metric.backward()
    finally:
        for h in handles:
            h.remove()
        hf.zero_grad()
    hd = hf.config.n_embd // hf.config.n_head
    per = {i: ((clean_acts[key][i] - acts[i].detach()) * acts[i].grad)[0] for i in acts}  # (T, d)
    L, H = hf.config.n_layer, hf.config.n_head
    if key != "z":
        return [per[i].sum(-1).tolist() for i in range(L)]
    heads = {i: per[i].view(per[i].size(0), H, hd).sum(-1) for i in range(L)}  # (T, H)
    if target == "attn_head":
        return [heads[i].sum(0).tolist() for i in range(L)]
    return heads[layer].t().tolist()


@pytest.mark.parametrize("target", patching.TARGETS)
def test_attribution_patching_is_its_definition(random_small, target):
    hf, ours = random_small
    clean, corrupted = random_pair()
    answer, wrong = pick_tokens(hf, clean, corrupted)
    got = patching.activation_patching(ours, clean, corrupted, answer, wrong, target, layer=5)
    want = hf_attribution(hf, clean, corrupted, answer, wrong, target, 5)
    assert_close(got["attribution"], want)
    assert -1.0 <= got["correlation"] <= 1.0


def test_random_model_is_gpt2_small(random_small):
    _, ours = random_small
    assert (ours.cfg.n_layers, ours.cfg.n_heads, ours.cfg.emb_dim, ours.cfg.vocab_size) == (12, 12, 768, 50257)
