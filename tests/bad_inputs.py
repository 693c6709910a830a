"""Bad sampling inputs a person can type, shared by the library's checks (tests/unit/test_bad_input.py)
and the running app's (tests/app/test_bad_input_api.py). A data module, not a test module."""

# (prompt, temperature, top_k, top_p, max_new_tokens) -> expected message fragment, or None = works
SAMPLING_CASES = [
    ("", 0.8, 40, 1.0, 5, "prompt is empty"),
    ("   \n\t", 0.8, 40, 1.0, 5, "prompt is empty"),
    ("x" * 20_001, 0.8, 40, 1.0, 5, "limit is 20,000"),
    ("Hello 😀🎉 world", 0.8, 40, 1.0, 5, None),
    ("你好，世界。注意力机制", 0.8, 40, 1.0, 5, None),
    ("mixed 混合 текст عربى 😀", 0.8, 40, 1.0, 5, None),
    ("control \x00\x07\x1b[31m chars", 0.8, 40, 1.0, 5, None),
    ("lone surrogate \ud800 here", 0.8, 40, 1.0, 5, None),
    ("<|endoftext|> typed by a user", 0.8, 40, 1.0, 5, None),
    ("long " * 2000, 0.8, 40, 1.0, 5, None),  # far longer than the context: cropped, said
    ("Hi", 0, 40, 1.0, 5, None),
    ("Hi", -0.5, 40, 1.0, 5, "Temperature must be 0 (greedy) or positive"),
    ("Hi", float("nan"), 40, 1.0, 5, "finite"),
    ("Hi", float("inf"), 40, 1.0, 5, "finite"),
    ("Hi", 1e6, 40, 1.0, 5, None),
    ("Hi", 0.8, 0, 1.0, 5, None),
    ("Hi", 0.8, -1, 1.0, 5, "top-k must be 0 (off) or a positive"),
    ("Hi", 0.8, 10**6, 1.0, 5, None),  # larger than the vocabulary: no filtering
    ("Hi", 0.8, 40, 0.0, 5, "top-p must be in (0, 1]"),
    ("Hi", 0.8, 40, 1.01, 5, "top-p must be in (0, 1]"),
    ("Hi", 0.8, 40, 1.0, 0, "at least one new token"),
    ("Hi", 0.8, 40, 1.0, 10**9, "at most 512"),
    ("Hi", "warm", 40, 1.0, 5, "Temperature must be a number"),
    ("Hi", 0.8, "many", 1.0, 5, "top-k must be a number"),
    ("Hi", 0.8, 2.5, 1.0, 5, "top-k must be a whole number"),
]
