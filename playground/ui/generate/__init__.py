"""The Generate tab: a prompt run token by token, the chips and the attention heatmaps beside them."""
