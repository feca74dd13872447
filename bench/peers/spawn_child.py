"""bench/peers/spawn_child.py — the original WorkManager's first Python
engine design, as a peer of bench/run: one `python3` process spawned per
event, the event as JSON on its stdin, the handler's answer as JSON on
its stdout.  The whole process start is part of every event's cost.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import handler  # noqa: E402

json.dump(handler.Process(json.load(sys.stdin)), sys.stdout)
