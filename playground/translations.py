"""Interface text in English and 中文.

The same keys serve two ways: ``gr.I18n`` translates component labels in the browser (its language,
or the one chosen in Gradio's Settings), and handlers build their own text with ``tr(lang, key, **values)``
(messages, tables, status lines, figure titles). Templates use ``str.format`` fields.
"""

EN = {
    "title": "GPT Playground",
    "subtitle": "Build a GPT-2-style model, look inside it, generate, and watch its attention.",
    "tab_model": "1 · Model",
    "tab_generate": "2 · Generate & attention",
    "tab_train": "3 · Train",
    "preset": "Preset",
    "config_fields": "Config fields (edit, then Build)",
    "vocab_size": "vocab_size",
    "context_length": "context_length",
    "emb_dim": "emb_dim",
    "n_heads": "n_heads",
    "n_layers": "n_layers",
    "drop_rate": "drop_rate",
    "qkv_bias": "qkv_bias",
    "tie_weights": "tie_weights (share tok_emb with out_head)",
    "pos_encoding": "Positions",
    "activation": "Activation",
    "norm_placement": "LayerNorm placement",
    "attention_impl": "Multi-head attention",
    "weights": "Weights",
    "seed_init": "Init seed",
    "hub_model": "OpenAI GPT-2 from the Hugging Face hub",
    "upload": "Upload a .safetensors checkpoint",
    "dtype": "Precision",
    "build": "Build model",
    "tree": "Module tree",
    "tree_depth": "Tree depth",
    "breakdown": "Where the parameters live (formula vs measured)",
    "prompt": "Prompt",
    "examples": "Examples",
    "temperature": "Temperature",
    "top_k": "top-k (0 = off)",
    "top_p": "top-p (1 = off)",
    "max_new_tokens": "Max new tokens",
    "seed": "Sampling seed",
    "greedy": "Greedy (always the most likely token)",
    "generate": "Generate",
    "stop": "Stop",
    "tokens": "Tokens (click a generated token)",
    "step": "Inspect step",
    "view": "Attention view",
    "layer": "Layer",
    "head": "Head",
    "log_scale": "Log colour scale (tames the first-token sink)",
    "query": "Query position",
    "export_json": "Export run (.json)",
    "export_npz": "Export run (.npz)",
    "export_model": "Export model (.safetensors)",
    "download": "Download",
    "corpus": "Corpus",
    "corpus_upload": "Upload a .txt",
    "corpus_paste": "…or paste text",
    "steps": "Steps",
    "lr": "Learning rate",
    "train": "Train",
    "use_trained": "Use the trained model",
    "train_config": "Model to train",
    # ---- i18n / presenter (issue 12): the page's language and presenter mode
    "lang_code": "en",
    "present": "Presenter mode",
    "present_info": "Larger type, fewer controls (also ?present=1 in the address)",
    "advanced": "More settings",
    # summary line and model description
    "summary": "**{n} parameters** · {size} in {dtype} · {tied} · {layers} layers × {heads} heads, d={d}, "
               "context {context} · {model}",
    "tied_yes": "tied embeddings (out_head shares tok_emb)",
    "tied_no": "untied embeddings",
    "recipe_random": "random init (seed {seed})",
    "recipe_bundled": "bundled Tiny Shakespeare model",
    "recipe_hub": "OpenAI weights: {repo}",
    "recipe_file": "checkpoint: {label}",
    "tying_state_tied": "tied",
    "tying_state_untied": "untied",
    "tying": "**Weight tying.** This model is *{state}*. The output head maps d={d} back to "
             "V={V} tokens: a {d}×{V} matrix of **{head}** numbers, the same "
             "shape as the token embedding. GPT-2 reuses the embedding there (tied): **{tied}** parameters. A separate "
             "head (untied, as the textbook's GPT_CONFIG_124M) adds those {head}: **{untied}**. That is the "
             "\"163M vs 124M\" difference for the textbook config (plus 27,648 qkv-bias numbers GPT-2 has and the "
             "textbook leaves out).",
    # the two tables
    "breakdown_headers": "component|formula|formula value|measured|agree",
    "tree_headers": "module|type|parameters (shapes)|own|total|tied|path",
    "tied_to": "tied → {name}",
    "total": "total",
    "token embedding": "token embedding",
    "position embedding": "position embedding",
    "attention QKV": "attention QKV",
    "attention output": "attention output",
    "feed-forward": "feed-forward",
    "layer norms": "layer norms",
    "output head": "output head",
    "training (AdamW, fp32)": "training (AdamW, fp32)",
    "kv_cache": "KV cache ({n} tokens, fp32)",
    "fig_treemap": "Parameters by module (tied weights counted once)",
    "fig_memory": "Memory · {mflops} MFLOPs per token at a full context",
    # choices (values stay English for the API; these are the labels)
    "w_bundled": "bundled (Tiny Shakespeare)",
    "w_random": "random init",
    "w_hub": "OpenAI GPT-2 (hub)",
    "w_upload": "uploaded checkpoint",
    "w_trained": "trained in the Train tab",
    "custom": "custom (the fields below)",
    "dtype_info": "bfloat16 halves memory and is faster on most CPUs; float32 is exact.",
    "v_one": "one head",
    "v_all": "all heads of the layer",
    "v_avg": "head average",
    "v_rollout": "rollout across layers",
    "v_prev": "overview: previous-token mass",
    "v_first": "overview: first-token mass",
    "v_entropy": "overview: entropy",
    "c_shakespeare": "Tiny Shakespeare (downloaded once, then cached)",
    "c_upload": "upload a .txt",
    "c_paste": "paste text",
    # model tab messages
    "ready": "Ready: {model} in {seconds} s.{extra}",
    "loaded_weights": " Loaded weights: {report}.",
    "need_upload": "Choose a .safetensors file to upload first.",
    "need_trained": "Train a model in the Train tab first (or wait for training to finish or stop).",
    "unexpected": "Something went wrong ({error}). Your model and results are unchanged.",
    "heads_label": "Heads with a pattern in the bundled model (measured; see README): pick one, then Generate",
    "head_line_break": "line-break head",
    "head_duplicate_token": "duplicate-token head",
    "head_example": "{label}: layer {layer}, head {head} ({ratio}× an even spread)",
    # generate tab
    "st_running": "Generating: ",
    "st_done": "Done: ",
    "st_stopped": "Stopped by you ",
    "st_error": "Ended early: ",
    "st_after": "after {n} of {max} tokens",
    "st_tokens": "{n} tokens",
    "st_token": "{n} token",
    "st_rate": "{rate} tokens/s",
    "st_cropped": "the prompt was cropped by {n} tokens from the left to fit the {context}-token context window",
    "st_window": "the window now starts at position {start} (older tokens fall out)",
    "legend": "Grey: prompt tokens (with their ids). Generated tokens show id · probability: "
              "{sure} ≥ 50% · {unsure} 10–50% · {surprise} < 10%. Click a token to inspect it.",
    "generate_first": "Generate first",
    "generate_to_see": "Generate to see attention",
    "pick_one": "Generate some tokens, then pick one.",
    "fig_step": "Step {i}: most likely next tokens under the sampling distribution",
    "fig_stages": "How each knob reshapes the distribution",
    "off": "off",
    "step_text": "**Step {i}** chose **{token}** (id {id}) at position {position}: "
                 "p = **{p}** under the sampling distribution, {raw_p} under the raw softmax, "
                 "rank **{rank}** of {vocab}. "
                 "Entropy {entropy} bits after the filters ({raw_entropy} bits raw); "
                 "{kept} tokens could have been drawn. Settings: temperature {temperature}, "
                 "top-k {top_k}, top-p {top_p}, ",
    "step_seed": "seed {seed}.",
    "step_seed_used": "no seed given: this run drew seed {seed} (type it in to repeat the run).",
    "outside_window": " Position {position} is outside the model's last context window (positions {start}–"
                      "{end}), so the attention view shows position {start}.",
    "prompt_position": "Position {position} is part of the prompt: the model read it, it did not choose it.",
    "no_run_export": "Generate something first; there is no run to export yet.",
    "run_exported": "Run exported as .{fmt}.",
    "model_exported": "Model exported; the upload box accepts it back.",
    "range_note": "{name}: {value} is outside {lo}–{hi}; the slider sets it to {clamped}.",
    # attention figures
    "window_note": " (window: positions {start}–{end})",
    "att_outside": "Position {query} is outside the model's last context window ({start}–{end}); showing position {start}.",
    "fig_all_heads": "Layer {layer}: every head{note}",
    "fig_head_avg": "Layer {layer}: average over heads{note}",
    "fig_rollout": "Attention rollout through all {n} layers{note}",
    "fig_overview": "Every layer × head: {metric}, averaged over positions {first}–{end}{note} · {scale}",
    "fig_one_head": "Layer {layer}, head {head}{note}",
    "fig_query": "Where position {query} ({label}) looked",
    "scale_entropy": "colour scale 0–log2({n}) = {top} bits",
    "scale_unit": "colour scale 0–1",
    "m_previous-token": "previous-token",
    "m_first-token": "first-token",
    "m_entropy": "entropy",
    "bits": " (bits)",
    # train tab
    "fig_loss": "Loss (cross-entropy, nats): training batches and held-out tenth",
    "base_unigram": "unigram (ignores context)",
    "base_uniform": "uniform guess (ln V)",
    "train_progress": "step {step} / {total} · {tokens} tokens · {elapsed} s · {rate} tokens/s{val}",
    "val_loss": " · validation loss {loss}",
    "unknown_model": "Unknown model {name!r}.",
    "training": "Training {model} on {corpus}.",
    "train_failed": "Training failed: {error}",
    "train_finished": "Finished after {n} steps. Press “Use the trained model” to generate with it.",
    "train_stopped": "Stopped after {n} steps. Press “Use the trained model” to generate with it.",
    "no_training": "No training is running in this session.",
    "stopping": "Stopping after the current step; what was learned so far is kept.",
    "train_first": "Train a model first (or wait for training to finish or stop).",
    "now_using": "Now using {model}.",
    "corpus_desc": "{name}: {chars} characters, {tokens} tokens ({train} for training, {val} held out)",
    "your upload": "your upload",
    "pasted text": "pasted text",
}

ZH = {
    "title": "GPT 实验场",
    "subtitle": "搭建一个 GPT-2 风格的模型，查看它的内部结构，生成文本，观察它的注意力。",
    "tab_model": "1 · 模型",
    "tab_generate": "2 · 生成与注意力",
    "tab_train": "3 · 训练",
    "preset": "预设配置",
    "config_fields": "配置字段（修改后点击“构建”）",
    "vocab_size": "vocab_size（词表大小）",
    "context_length": "context_length（上下文长度）",
    "emb_dim": "emb_dim（嵌入维度）",
    "n_heads": "n_heads（注意力头数）",
    "n_layers": "n_layers（层数）",
    "drop_rate": "drop_rate（Dropout 比例）",
    "qkv_bias": "qkv_bias（QKV 偏置）",
    "tie_weights": "tie_weights（输出层与词嵌入共享权重）",
    "pos_encoding": "位置编码",
    "activation": "激活函数",
    "norm_placement": "LayerNorm 位置",
    "attention_impl": "多头注意力实现",
    "weights": "权重",
    "seed_init": "初始化随机种子",
    "hub_model": "从 Hugging Face 下载 OpenAI GPT-2",
    "upload": "上传 .safetensors 检查点",
    "dtype": "精度",
    "build": "构建模型",
    "tree": "模块树",
    "tree_depth": "显示深度",
    "breakdown": "参数分布（公式 vs 实测）",
    "prompt": "提示词",
    "examples": "示例",
    "temperature": "温度",
    "top_k": "top-k（0 = 关闭）",
    "top_p": "top-p（1 = 关闭）",
    "max_new_tokens": "最多生成的 token 数",
    "seed": "采样随机种子",
    "greedy": "贪心解码（总是选概率最大的 token）",
    "generate": "生成",
    "stop": "停止",
    "tokens": "Token（点击生成的 token 查看详情）",
    "step": "查看第几步",
    "view": "注意力视图",
    "layer": "层",
    "head": "头",
    "log_scale": "对数色标（避免首 token 注意力汇聚淹没其他信息）",
    "query": "查询位置",
    "export_json": "导出本次运行（.json）",
    "export_npz": "导出本次运行（.npz）",
    "export_model": "导出模型（.safetensors）",
    "download": "下载",
    "corpus": "语料",
    "corpus_upload": "上传 .txt 文件",
    "corpus_paste": "……或粘贴文本",
    "steps": "训练步数",
    "lr": "学习率",
    "train": "开始训练",
    "use_trained": "使用训练好的模型",
    "train_config": "要训练的模型",
    # ---- i18n / presenter (issue 12)
    "lang_code": "zh-CN",
    "present": "演示模式",
    "present_info": "更大的字号、更少的控件（也可在地址后加 ?present=1）",
    "advanced": "更多设置",
    "summary": "**{n} 个参数** · {dtype} 下占 {size} · {tied} · {layers} 层 × {heads} 头，d={d}，"
               "上下文 {context} · {model}",
    "tied_yes": "嵌入共享（out_head 与 tok_emb 共用权重）",
    "tied_no": "嵌入不共享",
    "recipe_random": "随机初始化（种子 {seed}）",
    "recipe_bundled": "内置的 Tiny Shakespeare 模型",
    "recipe_hub": "OpenAI 权重：{repo}",
    "recipe_file": "检查点：{label}",
    "tying_state_tied": "共享",
    "tying_state_untied": "不共享",
    "tying": "**权重共享（weight tying）。** 这个模型的输出层与词嵌入*{state}*权重。输出层把 d={d} 映射回 "
             "V={V} 个 token：一个 {d}×{V} 的矩阵，共 **{head}** 个数，形状与词嵌入相同。"
             "GPT-2 在这里复用词嵌入（共享）：共 **{tied}** 个参数。单独的输出层（不共享，如教材中的 "
             "GPT_CONFIG_124M）会多出这 {head} 个：**{untied}**。这就是教材配置里“163M 与 124M”的差别"
             "（另加 GPT-2 有而教材没有的 27,648 个 qkv 偏置）。",
    "breakdown_headers": "组成部分|公式|公式值|实测|一致",
    "tree_headers": "模块|类型|参数（形状）|自身|合计|共享|路径",
    "tied_to": "共享 → {name}",
    "total": "合计",
    "token embedding": "词元嵌入",
    "position embedding": "位置嵌入",
    "attention QKV": "注意力 QKV",
    "attention output": "注意力输出",
    "feed-forward": "前馈网络",
    "layer norms": "层归一化",
    "output head": "输出头",
    "training (AdamW, fp32)": "训练（AdamW，fp32）",
    "kv_cache": "KV 缓存（{n} 个 token，fp32）",
    "fig_treemap": "各模块的参数（共享权重只计一次）",
    "fig_memory": "内存 · 满上下文时每个 token {mflops} MFLOPs",
    "w_bundled": "内置模型（Tiny Shakespeare）",
    "w_random": "随机初始化",
    "w_hub": "OpenAI GPT-2（Hugging Face）",
    "w_upload": "上传的检查点",
    "w_trained": "在“训练”页训练的模型",
    "custom": "自定义（下方字段）",
    "dtype_info": "bfloat16 内存减半，在多数 CPU 上更快；float32 是精确的。",
    "v_one": "单个注意力头",
    "v_all": "本层所有头",
    "v_avg": "各头平均",
    "v_rollout": "跨层注意力累积（rollout）",
    "v_prev": "总览：前一个 token 的权重",
    "v_first": "总览：首个 token 的权重",
    "v_entropy": "总览：熵",
    "c_shakespeare": "Tiny Shakespeare（首次下载后缓存）",
    "c_upload": "上传 .txt 文件",
    "c_paste": "粘贴文本",
    "ready": "就绪：{model}，用时 {seconds} 秒。{extra}",
    "loaded_weights": "已加载的权重：{report}。",
    "need_upload": "请先选择要上传的 .safetensors 文件。",
    "need_trained": "请先在“训练”页训练一个模型（或等待训练结束或停止）。",
    "unexpected": "出错了（{error}）。你的模型和结果没有改变。",
    "heads_label": "内置模型中有明显模式的注意力头（实测，见 README）：选一个，再点“生成”",
    "head_line_break": "换行头",
    "head_duplicate_token": "重复 token 头",
    "head_example": "{label}：第 {layer} 层，第 {head} 头（是均匀分布的 {ratio} 倍）",
    "st_running": "正在生成：",
    "st_done": "完成：",
    "st_stopped": "已被你停止，",
    "st_error": "提前结束：",
    "st_after": "生成了 {n} 个（上限 {max} 个）token",
    "st_tokens": "{n} 个 token",
    "st_token": "{n} 个 token",
    "st_rate": "每秒 {rate} 个 token",
    "st_cropped": "提示词从左侧裁掉了 {n} 个 token，以放进 {context} 个 token 的上下文窗口",
    "st_window": "窗口现在从位置 {start} 开始（更早的 token 已移出）",
    "legend": "灰色：提示词的 token（带 id）。生成的 token 显示 id · 概率："
              "{sure} ≥ 50% · {unsure} 10–50% · {surprise} < 10%。点击一个 token 查看详情。",
    "generate_first": "请先生成",
    "generate_to_see": "生成后即可查看注意力",
    "pick_one": "先生成一些 token，再选择其中一个。",
    "fig_step": "第 {i} 步：采样分布下最可能的下一个 token",
    "fig_stages": "每个参数如何改变概率分布",
    "off": "关闭",
    "step_text": "**第 {i} 步**在位置 {position} 选择了 **{token}**（id {id}）："
                 "采样分布下 p = **{p}**，原始 softmax 下为 {raw_p}，"
                 "在 {vocab} 个 token 中排第 **{rank}**。"
                 "过滤后的熵为 {entropy} 比特（原始为 {raw_entropy} 比特）；"
                 "有 {kept} 个 token 可能被抽中。设置：温度 {temperature}，"
                 "top-k {top_k}，top-p {top_p}，",
    "step_seed": "种子 {seed}。",
    "step_seed_used": "未指定种子：这次运行抽到的种子是 {seed}（填入它即可重现这次运行）。",
    "outside_window": "位置 {position} 在模型最后一个上下文窗口（位置 {start}–{end}）之外，"
                      "所以注意力视图显示位置 {start}。",
    "prompt_position": "位置 {position} 属于提示词：模型读取了它，而不是选择了它。",
    "no_run_export": "请先生成一些内容；现在还没有可导出的运行。",
    "run_exported": "运行已导出为 .{fmt}。",
    "model_exported": "模型已导出；上传框可以再载入它。",
    "range_note": "{name}：{value} 超出范围 {lo}–{hi}；滑块会把它设为 {clamped}。",
    "window_note": "（窗口：位置 {start}–{end}）",
    "att_outside": "位置 {query} 在模型最后一个上下文窗口（{start}–{end}）之外；显示位置 {start}。",
    "fig_all_heads": "第 {layer} 层：所有头{note}",
    "fig_head_avg": "第 {layer} 层：各头平均{note}",
    "fig_rollout": "贯穿全部 {n} 层的注意力累积{note}",
    "fig_overview": "所有层 × 头：{metric}，对位置 {first}–{end} 取平均{note} · {scale}",
    "fig_one_head": "第 {layer} 层，第 {head} 头{note}",
    "fig_query": "位置 {query}（{label}）关注了哪里",
    "scale_entropy": "色标 0–log2({n}) = {top} 比特",
    "scale_unit": "色标 0–1",
    "m_previous-token": "前一个 token 的权重",
    "m_first-token": "首个 token 的权重",
    "m_entropy": "熵",
    "bits": "（比特）",
    "fig_loss": "损失（交叉熵，nats）：训练批次与留出的十分之一",
    "base_unigram": "一元模型（不看上下文）",
    "base_uniform": "均匀猜测（ln V）",
    "train_progress": "第 {step} / {total} 步 · {tokens} 个 token · {elapsed} 秒 · 每秒 {rate} 个 token{val}",
    "val_loss": " · 验证损失 {loss}",
    "unknown_model": "未知的模型 {name!r}。",
    "training": "正在用{corpus}训练 {model}。",
    "train_failed": "训练失败：{error}",
    "train_finished": "训练完成，共 {n} 步。点击“使用训练好的模型”即可用它生成。",
    "train_stopped": "已在第 {n} 步停止。点击“使用训练好的模型”即可用它生成。",
    "no_training": "本会话中没有正在进行的训练。",
    "stopping": "将在当前这一步之后停止；已学到的内容会保留。",
    "train_first": "请先训练一个模型（或等待训练结束或停止）。",
    "now_using": "现在使用：{model}。",
    "corpus_desc": "{name}：{chars} 个字符，{tokens} 个 token（{train} 个用于训练，{val} 个留作验证）",
    "your upload": "你上传的文本",
    "pasted text": "粘贴的文本",
}

assert EN.keys() == ZH.keys(), "every interface string needs both languages"


LANGS = ("en", "zh-CN")


def normalize_lang(value) -> str:
    """"zh", "zh-CN", "zh_Hans", an Accept-Language header starting with Chinese… -> "zh-CN"; anything else "en"."""
    text = str(value or "").strip().lower().replace("_", "-")
    return "zh-CN" if text.startswith("zh") else "en"


def tr(lang: str | None, key: str, **values) -> str:
    """The text of ``key`` in ``lang`` (English when the key or the language has no translation)."""
    table = ZH if normalize_lang(lang) == "zh-CN" else EN
    text = table.get(key, EN.get(key, key))
    return text.format(**values) if values else text


# Words inside the parameter formulas (playground.inspection), which are otherwise maths.
FORMULA_ZH = {
    "(fixed sinusoids, a buffer)": "（固定的正弦编码，是缓冲区而非参数）",
    "(tied to the token embedding)": "（与词元嵌入共享）",
    "(post-norm: no final norm)": "（后归一化：没有最终的归一化层）",
}


def tr_formula(lang: str | None, formula: str) -> str:
    if normalize_lang(lang) != "zh-CN":
        return formula
    for en, zh in FORMULA_ZH.items():
        formula = formula.replace(" " + en, zh).replace(en, zh)
    return formula


# The messages users meet most often, as the library words them (its exceptions stay English for
# Python callers), and their Chinese. A message not listed here is shown as it is.
FIELD_ZH = {
    "Layer": "层", "Head": "头", "Query position": "查询位置", "Temperature": "温度", "Max new tokens": "最多生成的 token 数",
    "Sampling seed": "采样随机种子", "Init seed": "初始化随机种子", "Step": "步", "Tree depth": "显示深度",
    "Token position": "token 位置", "Steps": "训练步数", "Greedy": "贪心解码", "Precision": "精度", "Weights": "权重",
}
ERRORS_ZH = [
    (r"^(.+) must be a whole number, got (.+)\.$", "{0} 必须是整数，收到的是 {1}。"),
    (r"^(.+) must be a finite number, got (.+)\.$", "{0} 必须是有限的数，收到的是 {1}。"),
    (r"^(.+) must be a number, got (.+)\.$", "{0} 必须是数字，收到的是 {1}。"),
    (r"^(.+) must be between (.+) and (.+), got (.+)\.$", "{0} 必须在 {1} 到 {2} 之间，收到的是 {3}。"),
    (r"^(.+) must be at least (.+), got (.+)\.$", "{0} 至少为 {1}，收到的是 {2}。"),
    (r"^(.+) must be positive, got (.+)\.$", "{0} 必须是正数，收到的是 {1}。"),
    (r"^(.+) must be one of (.+); got (.+)\.$", "{0} 必须是以下之一：{1}；收到的是 {2}。"),
    (r"^The prompt is empty: .*$", "提示词是空的：请输入一些文字，让模型接着写。"),
    (r"^emb_dim \((\d+)\) must be divisible by n_heads \((\d+)\): .* Try n_heads in (.+)\.$",
     "emb_dim（{0}）必须能被 n_heads（{1}）整除：每个头分到 emb_dim / n_heads 维。可以试试 n_heads = {2}。"),
    (r"^Generate first: there is no run yet\.$", "请先生成：现在还没有运行。"),
    (r"^The text is too short: ([\d,]+) tokens, of which ([\d,]+) are held out for validation\. With a context of "
     r"([\d,]+) tokens each part needs at least ([\d,]+) tokens, so the text needs about ([\d,]+) tokens in all\..*$",
     "文本太短：共 {0} 个 token，其中 {1} 个留作验证。上下文为 {2} 个 token 时，每部分至少需要 {3} 个 token，"
     "所以文本总共需要约 {4} 个 token。请换一段更长的文本，或选更小的上下文。"),
    (r"^Temperature must be 0 \(greedy\) or positive, got (.+)\.$", "温度必须是 0（贪心）或正数，收到的是 {0}。"),
]


def tr_error(lang: str | None, message: str) -> str:
    """A library message in ``lang`` when it is one of the common ones (else unchanged)."""
    import re

    if normalize_lang(lang) != "zh-CN":
        return message
    for pattern, template in ERRORS_ZH:
        match = re.match(pattern, message, re.S)
        if match:
            return template.format(*(FIELD_ZH.get(g, g) for g in match.groups()))
    return message
