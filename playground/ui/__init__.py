"""The Gradio app (the only package that imports gradio); ``app.build_demo`` composes the page.

- ``app``: the page, one tab per module; ``prefs``: the page's language and presenter mode
- tabs: ``model_tab``; ``generate_tab`` (+ ``generate_layout``, ``attention_view``, ``chips``);
  ``inside_tab`` (+ ``inside_layout``, ``inside_data``, ``inside_picks``, ``cell_click``);
  ``train_tab``; ``compare_tab`` (+ ``compare_layout``, ``compare_views``, ``share``); ``tokenizer_tab``
- shared: ``model_switch`` (the session's model), ``listeners`` (language redraws), ``results``
  (named handler outputs), ``decoding`` (one decode step at a time), ``redraw`` (what a page drew);
  ``common`` gathers ``messages``, ``state``, ``parsing``, ``i18n`` and ``figure_dress``
"""
