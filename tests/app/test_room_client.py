"""bench/room_sse.py, the room benchmark's bare HTTP learner: on a small streaming app with a
session state, it sees the same updates, in the same order, as gradio_client does."""

import gradio as gr
import pytest
from gradio_client import Client

from bench.room_sse import Endpoint, stream_generate


@pytest.fixture(scope="module")
def app():
    def count(state, prompt, n):
        state = (state or 0) + 1  # the session's own state: the raw request must reach it too
        text = ""
        for i in range(int(n)):
            text += f"{prompt}{i} "
            yield state, text, f"Generating: {i + 1} tokens"
        yield state, text, f"Done: {int(n)} tokens"

    with gr.Blocks() as demo:
        state = gr.State(None)
        prompt, n = gr.Textbox(), gr.Number(precision=0)
        text, status = gr.Textbox(), gr.Textbox()
        gr.Button().click(count, [state, prompt, n], [state, text, status], api_name="generate")
    demo.queue().launch(prevent_thread_lock=True, quiet=True)
    yield demo
    demo.close()


def test_the_bare_stream_sees_what_gradio_client_sees(app):
    client = Client(app.local_url, verbose=False)
    expected = list(client.submit("tok", 5, api_name="/generate"))
    endpoint = Endpoint(client, "/generate")
    data = endpoint.data(
        {"prompt": "tok", "n": 5},
        client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/generate"]["parameters"],
    )
    assert data[0] is None  # the state input, filled by the server from the session
    start, stamped = stream_generate(endpoint, client.session_hash, data, None, 30)
    seen = [tuple(out[1:]) for _, out in stamped]  # gradio_client leaves the state out
    assert seen[-1] == tuple(expected[-1]) == ("tok0 tok1 tok2 tok3 tok4 ", "Done: 5 tokens")
    assert [s for s in seen if s != seen[-1]] == [tuple(e) for e in expected if tuple(e) != seen[-1]]
    assert all(t >= start for t, _ in stamped)
