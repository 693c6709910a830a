"""The targets a bench run is checked against, and the precision classes its variants are compared in.

``targets(result)`` lists every target the results can be checked against (PASS, FAIL, or n/a when
not measured); ``best_by_class`` finds the fastest of ours and of the peers in each precision class.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9


@dataclass
class Target:
    name: str
    value: float | None
    goal: str  # e.g. ">= 1.5"
    ok: bool | None  # None: not measured

    def row(self) -> str:
        status = "n/a " if self.ok is None else "PASS" if self.ok else "FAIL"
        shown = "—" if self.value is None else f"{self.value:.3g}"
        return f"  [{status}] {self.name}: {shown} (target {self.goal})"


def at_least(name, value, goal) -> Target:
    return Target(name, value, f">= {goal}", None if value is None else value >= goal)


def at_most(name, value, goal) -> Target:
    return Target(name, value, f"<= {goal}", None if value is None else value <= goal)


def targets(r: dict) -> list[Target]:
    d = r["decode_tok_s"]
    limit = r["bandwidth"]["limit_tok_s"]
    get = d.get
    best = max((get(f"ours {dt}") or 0) for dt in ("float32", "bfloat16", "int8"))
    out = [
        at_least("bfloat16 / transformers bfloat16", ratio(get("ours bfloat16"), get("transformers bfloat16")), 1.5),
        at_least("bfloat16 / bandwidth limit (bfloat16 weights)", ratio(get("ours bfloat16"), limit["bfloat16"]), 0.6),
        at_least("float32 / bandwidth limit (float32 weights)", ratio(get("ours float32"), limit["float32"]), 0.75),
        Target(
            "int8 / bandwidth limit (int8 weights, measured size; shown)",
            ratio(get("ours int8"), limit.get("int8")),
            "reported",
            None,
        ),
        at_least("int8 / ctranslate2 int8", ratio(get("ours int8"), get("ctranslate2 int8")), 1.0),
        Target(
            "best precision of ours / ctranslate2 int8 (shown)",
            ratio(best or None, get("ctranslate2 int8")),
            "reported",
            None,
        ),
        Target(
            "float32 / ctranslate2 float32 (shown)",
            ratio(get("ours float32"), get("ctranslate2 float32")),
            "reported",
            None,
        ),
        at_least("float32 / transformers float32", ratio(get("ours float32"), get("transformers float32")), 1.0),
        at_least(
            "float32 / re-run-everything loop (float32)", ratio(get("ours float32"), get("re-run loop float32")), 6.0
        ),
    ]
    for dt, best in best_by_class(d).items():
        if best["ours"] and best["peer"]:
            out.append(
                at_least(
                    f"{CLASSES[dt]}: best ours ({best['ours'][0]}) / best peer ({best['peer'][0]})",
                    ratio(best["ours"][1], best["peer"][1]),
                    1.0,
                )
            )
    for dt in ("float32", "bfloat16"):
        slow = ratio(get(f"ours {dt}"), get(f"ours {dt} + attention"))
        out.append(at_most(f"attention capture slowdown, {dt}", None if slow is None else slow - 1, 0.15))
    for m in r.get("memory", {}).values():
        if "peak_process_bytes" in m:
            out.append(
                at_most(
                    f"peak memory, 1024-token prompt + attention views, {m['dtype']} (GB)",
                    m["peak_process_bytes"] / GB,
                    1.5,
                )
            )
    cold = r.get("cold_start", {})
    out.append(
        at_most("cold start of app.py to default model ready (s)", cold.get("ready_s", cold.get("page_s")), 10.0)
    )
    users = r.get("concurrent_users", {})
    if "aggregate_tok_s" in users:
        out.append(Target("4 concurrent users: no request fails", len(users["errors"]), "0", not users["errors"]))
        out.append(
            at_least(
                "4 users aggregate tok/s / one user's", ratio(users["aggregate_tok_s"], users.get("single_tok_s")), 1.0
            )
        )
    load = r.get("under_training")
    if load:
        share = load["share_of_alone"]
        out.append(
            Target(
                "decode with a training thread, before (share of alone; shown)",
                share.get("with training (before)"),
                "reported",
                None,
            )
        )
        out.append(
            at_least(
                "decode with a training thread, after: background priority (share of alone)",
                share.get("with training (after: background priority)"),
                0.5,
            )
        )
    sc = r.get("scoring", {})
    if "median_s" in sc:  # issue 13
        out.append(at_most("scoring 8 KB of Tiny Shakespeare, bundled model (s)", sc["median_s"], 1.0))
        out.append(
            at_least("scoring / full-logits evaluation loop (speed)", ratio(sc["peer_median_s"], sc["median_s"]), 1.0)
        )
    for a in r.get("agreement", []):
        if a["model"].startswith("random") or a.get("precision", "").startswith("int8"):
            out.append(
                Target(
                    f"{a.get('precision', 'bfloat16')} vs float32 teacher-forced greedy agreement, "
                    f"{a['model']} (measured, shown)",
                    a["teacher_forced_agreement"],
                    "reported",
                    None,
                )
            )
    return out


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def dtype_of(name: str) -> str:
    """The precision class of a variant: 32-bit, 16-bit (bfloat16, llama.cpp's f16) or 8-bit (int8, q8_0)."""
    if "int8" in name or "q8_0" in name:
        return "int8"
    return "bfloat16" if "bfloat16" in name or name.endswith(" f16") else "float32"


PEERS = ("transformers", "ctranslate2", "llama.cpp", "onnxruntime")
CLASSES = {"float32": "32-bit", "bfloat16": "16-bit", "int8": "8-bit"}


def best_by_class(d: dict) -> dict[str, dict[str, tuple[str, float] | None]]:
    """{class: {"ours": (variant, tok/s), "peer": (variant, tok/s)}}: the fastest of each side in each precision
    class (ours without attention capture, which no peer offers)."""
    out: dict = {dt: {"ours": None, "peer": None} for dt in CLASSES}
    for name, rate in d.items():
        side = (
            "ours"
            if name.startswith("ours") and "attention" not in name
            else "peer"
            if name.startswith(PEERS)
            else None
        )
        if side is None:
            continue
        best = out[dtype_of(name)][side]
        if best is None or rate > best[1]:
            out[dtype_of(name)][side] = (name, rate)
    return out
