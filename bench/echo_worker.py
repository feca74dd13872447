# bench/echo_worker.py — the trivial Python worker of the Python engine's
# figures (bench/README.md, "Python engine"): one output, the event's data
# echoed.
def Process(event):
    return {"type": "echo.out", "data": event["data"]}
