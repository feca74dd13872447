"""bench/peers/handler.py — the one handler every Python contender runs.

bench/run compares the daemon with what a user would pick instead, each
running the same trivial worker: Process(event) counts the events it saw
and answers an event that echoes the input's data.  The peers' front ends
(wsgi_app.py, spawn_child.py, persistent_child.py) import it; the Python
engine's worker is this file's text as it is (no import: the engine's
allowlist has nothing to allow).
"""

COUNT = 0


def Process(event):
    global COUNT
    COUNT += 1
    return {"specversion": "1.0", "id": event.get("id", ""),
            "source": "echo", "type": str(event.get("type", "")) + ".out",
            "data": event.get("data")}
