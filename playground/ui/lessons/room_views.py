"""What a classroom room's pages show: the join link, the vote, the revealed counts, the teacher's status.

Pure functions of a room's public data and the page's language (no room is changed here).
"""

from __future__ import annotations

import html
import ipaddress
import os
import socket
from urllib.parse import urlsplit

import gradio as gr
import psutil
import segno

from playground.ui.common import md_literal, tr

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
    """``?room=CODE`` on an address the students' machines reach: the one the teacher's browser used, unless
    that names this machine only (``127.0.0.1``, ``localhost``)."""
    headers = getattr(request, "headers", None) or {}
    host = headers.get("x-forwarded-host") or headers.get("host") or "127.0.0.1:7860"
    scheme = headers.get("x-forwarded-proto") or getattr(getattr(request, "url", None), "scheme", None) or "http"
    name, port = split_host(host)
    if this_machine_only(name):
        reachable = reachable_name()
        if reachable:
            host = join_host(reachable, port)
    return f"{scheme}://{host}/?room={code}"


def listening_host() -> str:
    """The address the server listens on. ``gpt-playground --host`` sets ``GRADIO_SERVER_NAME`` (serve.main),
    so the variable holds it whichever way it was given; Gradio's default is loopback."""
    return os.environ.get("GRADIO_SERVER_NAME", "").strip() or "127.0.0.1"


def reachable_name() -> str | None:
    """The address other machines reach this server at, or None when it listens on loopback only (or no
    network address is found): every interface (``0.0.0.0``, ``::``) means the machine's LAN address, one
    specific address means that one."""
    listening = listening_host().strip("[]")
    if listening in ("0.0.0.0", "::"):
        return lan_address()
    return None if this_machine_only(listening) else listening


def this_machine_only(name: str) -> bool:
    """Whether a host name reaches this machine only: loopback, or ``0.0.0.0`` typed into a browser."""
    name = name.strip("[]").lower()
    if name in ("localhost", "0.0.0.0", "::", ""):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name: the network's to resolve


def split_host(host: str) -> tuple[str, str]:
    """``name:port`` as (name, port); an IPv6 address comes in brackets, ``[::1]:7860``."""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        return name, rest.removeprefix(":")
    if host.count(":") == 1:
        name, _, port = host.partition(":")
        return name, port
    return host, ""


def join_host(name: str, port: str) -> str:
    name = f"[{name}]" if ":" in name else name  # an IPv6 address takes brackets in a URL
    return f"{name}:{port}" if port else name


def lan_address() -> str | None:
    """This machine's address on its network, or None (no packet is sent): the one its route out leaves by,
    else, on a LAN with no route out (a bare switch, static addresses, a hotspot with no internet), the best of
    its interfaces' addresses."""
    return routed_address() or interface_address()


def routed_address() -> str | None:
    """The address the system would send from towards a private address beyond this machine: a UDP socket's
    ``connect`` only picks the route. Without a route (no default gateway) it raises."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            address = s.getsockname()[0]
    except OSError:
        return None
    return address if reachable_from_elsewhere(address) else None


# The private IPv4 ranges, most likely first for a classroom's network: 192.168.x is what home routers and
# hotspots hand out; 172.16-31.x comes last because container bridges (docker0's 172.17.0.1) live there.
PRIVATE_RANGES = tuple(ipaddress.ip_network(n) for n in ("192.168.0.0/16", "10.0.0.0/8", "172.16.0.0/12"))


def interface_address() -> str | None:
    """The best IPv4 address of the interfaces that are up: a private one before any other; never loopback or
    link-local (169.254.x: what a machine gives itself when nothing answers, which no other machine expects)."""
    try:
        interfaces, stats = psutil.net_if_addrs(), psutil.net_if_stats()
    except OSError:
        return None
    addresses = [
        a.address
        for name, addrs in interfaces.items()
        if name not in stats or stats[name].isup  # (an interface without stats is taken as up)
        for a in addrs
        if a.family == socket.AF_INET and reachable_from_elsewhere(a.address)
    ]
    return min(addresses, key=private_rank, default=None)


def reachable_from_elsewhere(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified)


def private_rank(address: str) -> int:
    """The place of an address's private range in PRIVATE_RANGES; any other address after them all."""
    ip = ipaddress.ip_address(address)
    return next((i for i, network in enumerate(PRIVATE_RANGES) if ip in network), len(PRIVATE_RANGES))


def qr_html(link: str) -> str:
    """The join link as a QR code: inline SVG (segno, no image file), its alt text the link itself."""
    svg = segno.make(link, error="m").svg_inline(
        border=2, dark="#000", light="#fff", omitsize=True
    )  # a viewBox: CSS sizes it
    label = html.escape(link, quote=True)
    return f"<div class='pg-room-qr' role='img' aria-label='{label}' title='{label}' data-link='{label}'>{svg}</div>"


def label_in(label, lang: str) -> str:
    return (label.get(lang) or label.get("en") or "") if isinstance(label, dict) else str(label)


def bars_html(choices: list, counts: dict, answered: int, lang: str, answer=None) -> str:
    """One bar per choice, as long as its share of ``answered`` (counts only: never who chose what); the
    ``answer``'s marked."""
    total, rows = max(1, answered), []
    for cid, label in choices:
        n = int(counts.get(cid, 0))
        width = round(100 * n / total)
        mark = " ✓" if answer is not None and cid == answer else ""
        rows.append(
            f"<div class='pg-room-bar' data-choice='{html.escape(cid)}' data-count='{n}'>"
            f"<span>{html.escape(label_in(label, lang))}{mark}</span>"
            f"<div class='pg-room-track'><div class='pg-room-fill' style='width:{width}%'></div></div>"
            f"<b>{n}</b></div>"
        )
    return "".join(rows)


def so_far_html(tally: dict, vote: dict | None, lang: str) -> str:
    """The room's answers so far as bars, for the teacher's page while a vote is open and the teacher chose to
    show them (no answer marked: that is the reveal's)."""
    if not vote or not tally.get("vote"):
        return ""
    answered = int(tally.get("answered") or 0)
    head = html.escape(tr(lang, "room_so_far", answered=answered))
    rows = bars_html(vote.get("choices") or [], tally.get("counts") or {}, answered, lang)
    return f"<div class='pg-room-counts pg-room-so-far'><b>{head}</b>{rows}</div>"


def counts_html(vote: dict, lang: str) -> str:
    """The revealed vote: the answer (none for a teacher's own question) and one bar per choice (counts only:
    never who chose what)."""
    answer = next((label_in(label, lang) for cid, label in vote["choices"] if cid == vote.get("answer")), "")
    answered = int(vote.get("answered") or 0)
    rows = bars_html(vote["choices"], vote.get("counts") or {}, answered, lang, vote.get("answer"))
    if vote.get("answer") is None:  # the teacher's own question: the counts are the reveal
        head = html.escape(tr(lang, "room_revealed_counts", answered=answered))
    else:
        head = html.escape(tr(lang, "room_revealed", answer=answer, answered=answered))
    if vote.get("text"):  # a question on the view (no lesson step on the pages holds it)
        head = f"{html.escape(label_in(vote['text'], lang))}<br>{head}"
    return f"<div class='pg-room-counts' data-answer='{html.escape(str(vote.get('answer') or ''))}'><b>{head}</b>{rows}</div>"


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


def tally_text(tally: dict, lang: str, vote: dict | None = None, counts: bool = False) -> str:
    """How many of the students here answered, and with ``counts`` each choice's count (by its label when
    the page has the vote's choices). The students here are those whose pages were seen lately; one who
    answered and closed the page still counts among them, so the line never says more answered than here.
    Markdown: the question and the choices, which a teacher may have typed, shown as typed (``md_literal``)."""
    if not tally.get("vote"):
        return ""
    here = max(int(tally.get("here") or 0), int(tally["answered"]))
    if counts:
        labels = {cid: label_in(label, lang) for cid, label in (vote or {}).get("choices", [])}
        shown = " · ".join(f"“{md_literal(labels.get(cid, cid))}” {n}" for cid, n in tally["counts"].items())
        text = tr(lang, "room_tally", answered=tally["answered"], here=here, counts=shown)
    else:
        text = tr(lang, "room_answered", answered=tally["answered"], here=here)
    if (vote or {}).get("text"):  # a question on the view: the teacher's page keeps it in sight while the room votes
        text = f"{md_literal(label_in(vote['text'], lang))}  \n{text}"
    return text


def here_text(tally: dict, lang: str) -> str:
    """How many students are here, and how many of them explore on their own (stepped away)."""
    if not tally.get("here"):
        return ""
    if tally.get("exploring"):
        return tr(lang, "room_here_exploring", here=tally["here"], exploring=tally["exploring"])
    return tr(lang, "room_here", here=tally["here"])


# What the teacher runs so that other machines reach the server (README, "Classroom mode").
SERVE_ON_NETWORK = "`gpt-playground --host 0.0.0.0`"


def counts_shown(room: dict, tally: dict | None) -> bool:
    """Whether the teacher's page shows the room's counts so far: only for the vote the teacher chose to
    show them for (``room["show_counts"]``: its id), as the page is the room's projector."""
    vote = (tally or {}).get("vote")
    return vote is not None and room.get("show_counts") == vote


def counts_hidden_again(room: dict, before) -> bool:
    """Whether a teacher's page whose room's vote was ``before`` (its id) and is now ``room["vote"]`` hides
    the counts again: a new vote (or none) starts hidden, unless the teacher already chose to show its counts."""
    now = (room.get("vote") or {}).get("id")
    return now != before and now != room.get("show_counts")


def teacher_status(room: dict, lang: str, link: str | None = None, tally: dict | None = None) -> str:
    """The teacher's status bar: the room's code and link, who is here, and how many of them answered (the
    counts so far only when the teacher chose to show them: ``counts_shown``)."""
    text = tr(lang, "room_teacher", code=room["code"])
    link = link or room.get("link")
    if link:
        text += " " + tr(lang, "room_link", link=link, code_hint=room["code"])
        if link_is_local(link):
            text += "  \n" + tr(lang, "room_link_local", command=SERVE_ON_NETWORK)
    answered = tally_text(tally or {}, lang, room.get("vote"), counts=counts_shown(room, tally))
    for line in (here_text(tally or {}, lang), answered):
        if line:
            text += "  \n" + line
    return text


def link_is_local(link: str) -> bool:
    """Whether a join link opens on this machine only (students' machines cannot follow it)."""
    return this_machine_only(urlsplit(link).hostname or "")
