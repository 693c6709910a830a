"""bench --inside's table and targets: the activation-patching grid of issue 37 is judged against its 5 s."""

from bench import inside


def test_the_patching_grid_has_its_5_s_target_and_a_table_row():
    row = {"median_s": 1.9, "min_s": 1.8, "max_s": 2.4}
    result = {"views": {inside.PATCH_RUN: {inside.PATCH_VIEW: row}}}
    (target,) = inside.targets(result)
    assert target.ok and target.goal == "<= 5.0" and inside.PATCH_RUN in target.name
    slow = {"views": {inside.PATCH_RUN: {inside.PATCH_VIEW: {**row, "median_s": 5.5}}}}
    assert not inside.targets(slow)[0].ok
    assert inside.PATCH_VIEW in inside.table(result)


def test_the_patching_call_patches_a_prompt_against_one_two_tokens_apart():
    class Cfg:
        vocab_size = 50257

    class Model:
        cfg = Cfg()

    calls = []
    import playground.inside.patching as patching

    real = patching.activation_patching
    patching.activation_patching = lambda *a: calls.append(a)
    try:
        inside.patching_call(Model())()
    finally:
        patching.activation_patching = real
    ((model, clean, corrupted, answer, wrong, target),) = calls
    assert len(clean) == len(corrupted) == 20 and target == "resid_pre"
    assert [i for i in range(20) if clean[i] != corrupted[i]] == [3, 10] and answer != wrong


def test_a_baseline_forward_that_no_longer_imports_is_skipped_not_fatal(monkeypatch, capsys):
    """The forward before hooks comes from git and is run against today's modules; once it imports a name they no
    longer have (``check_build_size``), ``bench --inside`` ended in an ImportError after all its views were timed."""
    import subprocess
    import sys

    class Done:
        def __init__(self, stdout):
            self.stdout = stdout

    answers = iter([Done("abc1234567890\n"), Done("from playground.engine.config import no_such_name\n")])
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: next(answers))
    assert inside.baseline_model_class() is None
    assert "does not load against today's modules" in capsys.readouterr().out
    assert "bench_baseline_model" not in sys.modules
