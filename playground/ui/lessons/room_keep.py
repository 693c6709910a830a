"""What a browser keeps of its rooms: the teacher's key and a student's member id, so a reload is the same page.

A reloaded teacher's page leads its room again; a reloaded student's page (or a second tab) is the same member:
one ballot, counted once among those here.

When a room starts, the page's hidden ``room_secret`` box gets ``{"code", "key"}`` and ``SAVE_JS`` puts
the key in the browser's local storage under ``pg-room-key:CODE`` and changes the address from
``?room=new`` to ``?room=CODE`` (the code only: the key is never in an address, a link or the page's
text). On a page load ``LOAD_JS`` hands the load event what this browser keeps for the code in the
address, if anything; ``lead_again`` checks a key against the room (``ROOMS.check_teacher``): the right key
leads the room again, anything else is a student's join. Ending the room forgets the key (``{"code",
"ended": true}``).

A student's page never receives a key: when it joins, its box gets ``{"code", "member"}``, which ``SAVE_JS``
keeps under ``pg-room-member:CODE``. Its next join of that room (the page loaded again, or the code typed:
``JOIN_JS`` reads the member kept for the typed code) hands it back (``kept_member``), and the room takes it
again only when it is one of its members (``ROOMS.join``); else the page gets a new one. A browser keeps the
``KEEP`` newest of each.
"""

from __future__ import annotations

import json

from playground.server.room_codes import normalize_code
from playground.server.rooms import ROOMS, RoomError
from playground.ui.common import client_address

KEEP = 8  # the keys (and the member ids) a browser keeps, the newest: a day's rooms, not a growing list
MAX_KEPT_CHARS = 200  # a key or member id longer than any the rooms give is no kept one

# keep(kind, code, value): ``value`` under pg-room-KIND:CODE (null forgets it), the KEEP newest codes
# listed under pg-room-KINDs; kept(code, kinds): what this browser keeps of ``kinds`` for ``code``, as the
# room_secret box's JSON ('' for nothing).
_STORE_JS = f"""
  const normal = (text) => String(text || '').toUpperCase().replace(/[\\s-]/g, '');
  const keep = (kind, code, value) => {{
    const list = 'pg-room-' + kind + 's';
    const codes = JSON.parse(localStorage.getItem(list) || '[]').filter(c => c !== code);
    if (value === null) localStorage.removeItem('pg-room-' + kind + ':' + code);
    else {{ localStorage.setItem('pg-room-' + kind + ':' + code, value); codes.push(code); }}
    while (codes.length > {KEEP}) localStorage.removeItem('pg-room-' + kind + ':' + codes.shift());
    localStorage.setItem(list, JSON.stringify(codes));
  }};
  const kept = (code, kinds) => {{
    const found = {{code}};
    try {{
      for (const kind of kinds) {{
        const value = code ? localStorage.getItem('pg-room-' + kind + ':' + code) : null;
        if (value) found[kind] = value;
      }}
    }} catch (e) {{}}
    return Object.keys(found).length > 1 ? JSON.stringify(found) : '';
  }};
"""

SAVE_JS = f"""(secret) => {{
  {_STORE_JS}
  let r = {{}};
  try {{ r = JSON.parse(secret || '{{}}'); }} catch (e) {{ return []; }}
  if (!r.code) return [];
  try {{
    if (r.ended) keep('key', r.code, null);
    else if (r.member) keep('member', r.code, r.member);
    else if (r.key) keep('key', r.code, r.key);
  }} catch (e) {{}}
  if (r.ended || !r.key) return [];
  const u = new URL(window.location.href);
  if (u.searchParams.get('room') !== r.code) {{ u.searchParams.set('room', r.code); history.replaceState(null, '', u); }}
  return [];
}}"""

# The load event's inputs as they are, the last one (the room_secret box) replaced by what this browser
# keeps for the address's room: the teacher's key, a student's member id.
LOAD_JS = f"""(...args) => {{
  {_STORE_JS}
  const code = normal(new URL(window.location.href).searchParams.get('room'));
  args[args.length - 1] = kept(code, ['key', 'member']);
  return args;
}}"""

# Join's inputs as they are, the last one (the room_secret box) replaced by the member id this browser
# keeps for the code typed before it.
JOIN_JS = f"""(...args) => {{
  {_STORE_JS}
  args[args.length - 1] = kept(normal(args[args.length - 2]), ['member']);
  return args;
}}"""


def secret(code: str, key: str | None = None, ended: bool = False, member: str | None = None) -> str:
    """What the room_secret box hands SAVE_JS: the teacher's key, a student's member id, or the room ended."""
    if ended:
        return json.dumps({"code": code, "ended": True})
    if member is not None:
        return json.dumps({"code": code, "member": member})
    return json.dumps({"code": code, "key": key})


def _kept(saved, code, name: str) -> tuple[str, str] | None:
    """(the room's canonical code, the string ``name``) when ``saved`` (what the browser keeps) holds one for
    room ``code``, else None."""
    try:
        kept = json.loads(saved) if isinstance(saved, str) and saved else None
    except ValueError:
        return None
    if not (isinstance(kept, dict) and isinstance(kept.get(name), str) and len(kept[name]) <= MAX_KEPT_CHARS):
        return None
    canonical = normalize_code(code)
    if canonical is None or normalize_code(kept.get("code")) != canonical:
        return None
    return canonical, kept[name]


def lead_again(saved, code) -> dict | None:
    """``{"code", "key"}`` when ``saved`` (what the browser keeps) is the key of the open room ``code``."""
    found = _kept(saved, code, "key")
    if found is None:
        return None
    canonical, key = found
    try:
        ROOMS.check_teacher(canonical, key, client_address())
    except RoomError:  # ended, or not this room's key: the page joins as a student (and is told if it ended)
        return None
    return {"code": canonical, "key": key}


def kept_member(saved, code) -> str | None:
    """The member id ``saved`` (what the browser keeps) holds for room ``code``, or None; the room alone says
    whether it is one of its members (``ROOMS.join``)."""
    found = _kept(saved, code, "member")
    return None if found is None else found[1]
