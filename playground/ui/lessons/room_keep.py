"""The teacher's key kept in the teacher's browser, so a reload of the teacher's page leads its room again.

When a room starts, the page's hidden ``room_secret`` box gets ``{"code", "key"}`` and ``SAVE_JS`` puts
the key in the browser's local storage under ``pg-room-key:CODE`` and changes the address from
``?room=new`` to ``?room=CODE`` (the code only: the key is never in an address, a link or the page's
text). On a page load ``LOAD_JS`` hands the load event the key this browser keeps for the code in the
address, if any; ``lead_again`` checks it against the room (``ROOMS.check_teacher``): the right key leads the
room again, anything else is a student's join. A student's page never receives a key: its box is never
written. Ending the room forgets the key (``{"code", "ended": true}``).
"""

from __future__ import annotations

import json

from playground.server.room_codes import normalize_code
from playground.server.rooms import ROOMS, RoomError
from playground.ui.common import client_address

KEEP = 8  # the keys a browser keeps (the newest): a teacher's rooms of a day, not a growing list

SAVE_JS = f"""(secret) => {{
  let r = {{}};
  try {{ r = JSON.parse(secret || '{{}}'); }} catch (e) {{ return []; }}
  if (!r.code) return [];
  const name = 'pg-room-key:' + r.code;
  try {{
    if (r.ended) {{ localStorage.removeItem(name); return []; }}
    if (!r.key) return [];
    localStorage.setItem(name, r.key);
    const kept = JSON.parse(localStorage.getItem('pg-room-keys') || '[]').filter(c => c !== r.code);
    kept.push(r.code);
    while (kept.length > {KEEP}) localStorage.removeItem('pg-room-key:' + kept.shift());
    localStorage.setItem('pg-room-keys', JSON.stringify(kept));
  }} catch (e) {{}}
  const u = new URL(window.location.href);
  if (u.searchParams.get('room') !== r.code) {{ u.searchParams.set('room', r.code); history.replaceState(null, '', u); }}
  return [];
}}"""

# The load event's inputs as they are, the last one (the room_secret box) replaced by what this browser
# keeps for the address's room.
LOAD_JS = """(...args) => {
  const code = (new URL(window.location.href).searchParams.get('room') || '').toUpperCase().replace(/[\\s-]/g, '');
  let key = null;
  try { key = code ? localStorage.getItem('pg-room-key:' + code) : null; } catch (e) {}
  args[args.length - 1] = key ? JSON.stringify({code, key}) : '';
  return args;
}"""


def secret(code: str, key: str | None = None, ended: bool = False) -> str:
    return json.dumps({"code": code, "ended": True} if ended else {"code": code, "key": key})


def lead_again(saved, code) -> dict | None:
    """``{"code", "key"}`` when ``saved`` (what the browser keeps) is the key of the open room ``code``."""
    try:
        kept = json.loads(saved) if isinstance(saved, str) and saved else None
    except ValueError:
        return None
    if not (isinstance(kept, dict) and isinstance(kept.get("key"), str) and len(kept["key"]) <= 200):
        return None
    canonical = normalize_code(code)
    if canonical is None or normalize_code(kept.get("code")) != canonical:
        return None
    try:
        ROOMS.check_teacher(canonical, kept["key"], client_address())
    except RoomError:  # ended, or not this room's key: the page joins as a student (and is told if it ended)
        return None
    return {"code": canonical, "key": kept["key"]}
