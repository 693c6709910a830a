"""What a classroom room's pages show: the join link, the vote, the revealed counts, the teacher's status.

Pure functions of a room's public data and the page's language (no room is changed here).
"""

from __future__ import annotations

import html
import os
import socket

import gradio as gr
import segno

from playground.ui.common import tr

# The join link's QR code stays dark on white in either theme (a phone's camera reads it best so), and
# large on a projector; each revealed answer is one row: its label, its bar, its count.
CSS = """
#pg-room-qr:not(:has(.pg-room-qr)) { display: none; }
#pg-room-qr .pg-room-qr { display: inline-block; background: #fff; padding: 6px; border-radius: 6px; line-height: 0; }
#pg-room-qr svg { width: 168px; height: 168px; }
body.pg-present #pg-room-qr svg { width: 340px !important; height: 340px !important; }  /* (over Gradio's scoped copy) */
.pg-room-bar { display: grid; grid-template-columns: minmax(6em, max-content) minmax(60px, 1fr) 3em;
  align-items: center; gap: 4px 10px; margin: 4px 0; }
.pg-room-bar .pg-room-track { height: 12px; border-radius: 3px; background: var(--border-color-primary); }
.pg-room-bar .pg-room-fill { height: 100%; border-radius: 3px; background: #4c78a8; }
.pg-room-bar b { text-align: right; font-variant-numeric: tabular-nums; }
body.pg-present #pg-room-status strong { font-size: 30px !important; letter-spacing: 0.08em; }  /* the code, read off the screen */
body.pg-present .pg-room-bar { font-size: 22px !important; }
body.pg-present .pg-room-bar .pg-room-track { height: 20px !important; }
"""


def join_link(code: str, request) -> str:
    """``?room=CODE`` on the address the teacher's browser used; on loopback while the server listens
    beyond it (``GRADIO_SERVER_NAME=0.0.0.0``), the machine's LAN address instead."""
    headers = getattr(request, "headers", None) or {}
    host = headers.get("x-forwarded-host") or headers.get("host") or "127.0.0.1:7860"
    scheme = headers.get("x-forwarded-proto") or getattr(getattr(request, "url", None), "scheme", None) or "http"
    name, _, port = host.rpartition(":") if host.count(":") == 1 else (host, "", "")
    if name in ("127.0.0.1", "localhost", "0.0.0.0") and os.environ.get("GRADIO_SERVER_NAME", "") not in (
        "",
        "127.0.0.1",
    ):
        lan = lan_address()
        if lan:
            host = f"{lan}:{port}" if port else lan
    return f"{scheme}://{host}/?room={code}"


def lan_address() -> str | None:
    """This machine's address on its network (no packet is sent), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            address = s.getsockname()[0]
        return None if address.startswith("127.") else address
    except OSError:
        return None


def qr_html(link: str) -> str:
    """The join link as a QR code: inline SVG (segno, no image file), its alt text the link itself."""
    svg = segno.make(link, error="m").svg_inline(
        border=2, dark="#000", light="#fff", omitsize=True
    )  # a viewBox: CSS sizes it
    label = html.escape(link, quote=True)
    return f"<div class='pg-room-qr' role='img' aria-label='{label}' title='{label}' data-link='{label}'>{svg}</div>"


def label_in(label, lang: str) -> str:
    return (label.get(lang) or label.get("en") or "") if isinstance(label, dict) else str(label)


def counts_html(vote: dict, lang: str) -> str:
    """The revealed vote: the answer (none for a teacher's own question) and one bar per choice (counts only:
    never who chose what)."""
    counts, total = vote.get("counts") or {}, max(1, int(vote.get("answered") or 0))
    answer = next((label_in(label, lang) for cid, label in vote["choices"] if cid == vote.get("answer")), "")
    rows = []
    for cid, label in vote["choices"]:
        n = int(counts.get(cid, 0))
        width = round(100 * n / total)
        mark = " ✓" if cid == vote.get("answer") else ""
        rows.append(
            f"<div class='pg-room-bar' data-choice='{html.escape(cid)}' data-count='{n}'>"
            f"<span>{html.escape(label_in(label, lang))}{mark}</span>"
            f"<div class='pg-room-track'><div class='pg-room-fill' style='width:{width}%'></div></div>"
            f"<b>{n}</b></div>"
        )
    answered = int(vote.get("answered") or 0)
    if vote.get("answer") is None:  # the teacher's own question: the counts are the reveal
        head = html.escape(tr(lang, "room_revealed_counts", answered=answered))
    else:
        head = html.escape(tr(lang, "room_revealed", answer=answer, answered=answered))
    if vote.get("text"):  # a question on the view (no lesson step on the pages holds it)
        head = f"{html.escape(label_in(vote['text'], lang))}<br>{head}"
    return f"<div class='pg-room-counts' data-answer='{html.escape(str(vote.get('answer') or ''))}'><b>{head}</b>{''.join(rows)}</div>"


def vote_radio(vote: dict | None, lang: str, student: bool):
    if not student or vote is None:
        return gr.update(visible=False, choices=[], value=None)
    return gr.update(
        visible=True,
        choices=[(label_in(label, lang), cid) for cid, label in vote["choices"]],
        value=vote.get("mine"),
        interactive=bool(vote.get("open")),
        label=label_in(vote["text"], lang) if vote.get("text") else tr(lang, "room_vote"),
    )


def tally_text(tally: dict, lang: str, vote: dict | None = None) -> str:
    """How many answered, and each choice's count (by its label when the page has the vote's choices)."""
    if not tally.get("vote"):
        return ""
    labels = {cid: label_in(label, lang) for cid, label in (vote or {}).get("choices", [])}
    counts = " · ".join(f"“{labels.get(cid, cid)}” {n}" for cid, n in tally["counts"].items())
    text = tr(lang, "room_tally", answered=tally["answered"], members=tally["members"], counts=counts)
    if (vote or {}).get("text"):  # a question on the view: the teacher's page keeps it in sight while the room votes
        text = f"{label_in(vote['text'], lang)}  \n{text}"
    return text


def here_text(tally: dict, lang: str) -> str:
    """How many students are here, and how many of them explore on their own (stepped away)."""
    if not tally.get("here"):
        return ""
    if tally.get("exploring"):
        return tr(lang, "room_here_exploring", here=tally["here"], exploring=tally["exploring"])
    return tr(lang, "room_here", here=tally["here"])


def teacher_status(room: dict, lang: str, link: str | None = None, tally: dict | None = None) -> str:
    text = tr(lang, "room_teacher", code=room["code"])
    if link or room.get("link"):
        text += " " + tr(lang, "room_link", link=link or room.get("link"), code_hint=room["code"])
    for line in (here_text(tally or {}, lang), tally_text(tally or {}, lang, room.get("vote"))):
        if line:
            text += "  \n" + line
    return text
