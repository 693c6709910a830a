"""Capture and the logit lens against transformers' own hidden states, on GPT-2-layout weights
(TransformerLens-style logit lens by hand; interventions themselves: tests/unit/test_interventions.py)."""

import pytest
import torch

from playground.inside.interventions import run_with_hooks


def test_capture_and_logit_lens_match_transformers_hidden_states(tmp_path):
    transformers = pytest.importorskip("transformers")
    from playground.engine.hf_hub import load_pretrained
    from playground.inside.lenses import logit_lens

    torch.manual_seed(7)
    hf_cfg = transformers.GPT2Config(
        n_embd=64, n_layer=3, n_head=4, n_positions=64, initializer_range=0.2, attn_implementation="eager"
    )
    hf = transformers.GPT2LMHeadModel(hf_cfg).eval()
    hf.save_pretrained(tmp_path)
    ours = load_pretrained(tmp_path, device="cpu")
    ids = torch.randint(0, 50257, (1, 10), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = hf(ids, output_hidden_states=True)
    _, cache = run_with_hooks(ours, ids)
    hs = out.hidden_states  # embeddings, after blocks 0..L-2, and ln_f(after the last block)
    L = hf_cfg.n_layer
    for i in range(L):
        torch.testing.assert_close(cache.resid[i], hs[i], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ours.final_norm(cache.resid[L]), hs[L], rtol=1e-4, atol=1e-4)
    # The lens by hand, as TransformerLens users write it: lm_head(ln_f(hidden state)).
    with torch.no_grad():
        by_hand = [hf.lm_head(hf.transformer.ln_f(h)) for h in hs[:L]] + [out.logits]
    lens = logit_lens(ours, ids[0].tolist())
    for layer, logits in enumerate(by_hand):
        probs = logits[0].double().softmax(-1)
        assert lens["top_id"][layer] == probs.argmax(-1).tolist()
        torch.testing.assert_close(
            torch.tensor(lens["top_prob"][layer], dtype=torch.float64), probs.max(-1).values, rtol=1e-4, atol=1e-5
        )
        nxt = probs[torch.arange(9), ids[0, 1:]]
        torch.testing.assert_close(
            torch.tensor(lens["next_prob"][layer][:-1], dtype=torch.float64), nxt, rtol=1e-4, atol=1e-6
        )
