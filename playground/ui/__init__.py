"""The Gradio app (the only package that imports gradio); ``app.build_demo`` composes the page.

- ``app``: the page and its wiring; ``serve``: the ``gpt-playground`` command; ``prefs``: the page's
  language and presenter mode; ``show_me``: a lesson step's "Show me", which opens another tab
- one package per tab, none importing another: ``lessons`` (with the classroom room), ``model``,
  ``generate``, ``inside``, ``train``, ``compare``, ``tokenizer``; each has its ``layout`` (the
  components and their wiring) and its handlers (``tab``), with views beside them
- shared: ``attention_view`` and ``chips`` (the run's heatmaps and tokens, also drawn by lessons and
  rooms), ``model_switch`` (the session's model), ``listeners`` (language redraws), ``results``
  (named handler outputs), ``redraw`` (what a page drew); ``common`` gathers ``messages``, ``state``,
  ``parsing``, ``i18n`` and ``figure_dress``
"""
