#!/usr/bin/env python3
"""A mock model server for benchmarking `pev agent`: it speaks the Anthropic Messages API
(POST /v1/messages, whole JSON responses) and answers every call after a fixed delay.

Roles are told apart by the request's `model` (bench/agent_parallel.sh configures
claude-opus-4-6 for the planner, claude-sonnet-4-5 for the executor, claude-haiku-4-5 for the
verifier). The planner gets a plan of STEPS independent instruction steps `part-1` ... `part-N`;
step k must leave `out/part-k.txt` holding `part k`. The executor's answer depends only on the
request (its step from the kickoff "Carry out step `ID`", its turn from the number of assistant
messages), so parallel steps can arrive in any order:

  turn 0          file.write out/part-k.txt = "part k\\n"
  turns 1..T-2    file.read out/part-k.txt
  turn T-1        a text summary (ends the step)

so each step takes exactly T executor calls. With --judge the steps carry an acceptance
criterion, and the verifier is asked once per step (it always passes).

GET /stats returns the calls per role and `busy_s`, the summed time from a request's arrival
(its request line read; header parsing included) to its response written, delay included; POST /reset zeroes them. The listening
port is printed on stdout as `port N` once the server is ready.

Usage: mock_model.py [--port 0] [--delay-ms 200] [--steps 8] [--turns 3] [--judge]
                     [--write-scripts DIR]
--write-scripts writes the same conversation as pev script files (planner.json, executor.json,
verifier.json, for `provider = "script:…"`; steps in plan order, as --jobs 1 runs them) and exits.
Only the Python standard library is used.
"""

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PLANNER = "claude-opus-4-6"
EXECUTOR = "claude-sonnet-4-5"
VERIFIER = "claude-haiku-4-5"
ROLES = {PLANNER: "planner", EXECUTOR: "executor", VERIFIER: "verifier"}


def plan(steps, judge):
    out = []
    for k in range(1, steps + 1):
        step = {
            "id": f"part-{k}",
            "title": f"Write part {k}",
            "description": f"Write out/part-{k}.txt containing the line 'part {k}', then read it back.",
            "assertions": [
                {"type": "file_contains", "path": f"out/part-{k}.txt", "pattern": f"part {k}"}
            ],
        }
        if judge:
            step["acceptance_criteria"] = [f"out/part-{k}.txt holds exactly 'part {k}'"]
        out.append(step)
    return {"goal": f"Write the {steps} part files", "steps": out}


def executor_turn(step_id, turn, turns):
    """The content blocks and stop reason of the executor's answer at `turn` of `step_id`."""
    k = step_id.rsplit("-", 1)[-1]
    path = f"out/part-{k}.txt"
    if turn >= turns - 1:
        return [{"type": "text", "text": f"Wrote {path} and read it back."}], "end_turn"
    if turn == 0:
        call = ("file.write", {"path": path, "content": f"part {k}\n"})
    else:
        call = ("file.read", {"path": path})
    block = {"type": "tool_use", "id": f"toolu_{step_id}_{turn}", "name": call[0], "input": call[1]}
    return [block], "tool_use"


VERDICT = {
    "answers": [{"question": "Is the file right?", "yes": True, "confidence": 0.95}],
    "pass": True,
    "confidence": 0.95,
    "feedback": "the file holds the line",
}


def answer(body, args):
    """(content, stop_reason) for one request body."""
    model = body.get("model", "")
    role = ROLES.get(model)
    if role == "planner":
        return [{"type": "text", "text": json.dumps(plan(args.steps, args.judge))}], "end_turn"
    if role == "verifier":
        return [{"type": "text", "text": json.dumps(VERDICT)}], "end_turn"
    if role == "executor":
        messages = body.get("messages", [])
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        first = messages[0]["content"] if messages else ""
        if isinstance(first, list):
            first = "".join(b.get("text", "") for b in first)
        step_id = first.split("`")[1] if first.count("`") >= 2 else "part-0"
        return executor_turn(step_id, turn, args.turns)
    return None, None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with getattr(self, "lock", threading.Lock()):
            self.calls = {"planner": 0, "executor": 0, "verifier": 0, "other": 0}
            self.busy = 0.0

    def add(self, role, seconds):
        with self.lock:
            self.calls[role] = self.calls.get(role, 0) + 1
            self.busy += seconds

    def snapshot(self):
        with self.lock:
            return {"calls": dict(self.calls), "total": sum(self.calls.values()), "busy_s": self.busy}


class Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: with 8 parallel steps connecting at once, the
    # two connections past the accept queue lose their handshake ACK and wait for a TCP
    # retransmission (200 ms minimum RTO), which looked like an extra model turn.
    request_queue_size = 128
    daemon_threads = True


def make_handler(args, stats):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the API does
        # Without this the body (a second small write after the headers) waits for the
        # client's delayed ACK under Nagle's algorithm: 40 ms added to every call.
        disable_nagle_algorithm = True

        def log_message(self, *_):
            pass

        def send_json(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/stats":
                self.send_json(200, stats.snapshot())
            else:
                self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

        def parse_request(self):
            # The clock starts once the request line has arrived, so the header parsing of
            # http.server counts as time in the mock.
            self.started = time.perf_counter()
            return super().parse_request()

        def do_POST(self):
            start = getattr(self, "started", time.perf_counter())
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length)
            if self.path == "/reset":
                stats.reset()
                self.send_json(200, {"ok": True})
                return
            body = json.loads(raw or b"{}")
            content, stop = answer(body, args)
            role = ROLES.get(body.get("model", ""), "other")
            if args.delay_ms > 0:
                time.sleep(args.delay_ms / 1000.0)
            if content is None:
                self.send_json(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                 "message": "unknown model"}})
            else:
                self.send_json(200, {
                    "id": "msg_bench", "type": "message", "role": "assistant",
                    "model": body.get("model", ""), "content": content, "stop_reason": stop,
                    "stop_sequence": None, "usage": {"input_tokens": 1000, "output_tokens": 50},
                })
            stats.add(role, time.perf_counter() - start)

    return Handler


def write_scripts(args):
    import os

    os.makedirs(args.write_scripts, exist_ok=True)
    usage = {"input_tokens": 1000, "output_tokens": 50}
    text = lambda t: {"content": [{"type": "text", "text": t}], "usage": usage}
    planner = {"turns": [text(json.dumps(plan(args.steps, args.judge)))]}
    turns = []
    for k in range(1, args.steps + 1):
        for t in range(args.turns):
            content, _ = executor_turn(f"part-{k}", t, args.turns)
            turns.append({"content": content, "usage": usage})
    verifier = {"turns": [text(json.dumps(VERDICT)) for _ in range(args.steps if args.judge else 0)]}
    for name, doc in (("planner", planner), ("executor", {"turns": turns}), ("verifier", verifier)):
        with open(os.path.join(args.write_scripts, f"{name}.json"), "w") as f:
            json.dump(doc, f)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--delay-ms", type=float, default=200.0)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--judge", action="store_true")
    p.add_argument("--write-scripts", metavar="DIR")
    args = p.parse_args()
    if args.turns < 1:
        p.error("--turns must be at least 1")
    if args.write_scripts:
        write_scripts(args)
        return
    stats = Stats()
    server = Server(("127.0.0.1", args.port), make_handler(args, stats))
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
