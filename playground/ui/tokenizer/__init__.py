"""The Tokenizer tab: text as GPT-2 BPE tokens, and how each merge built them."""
