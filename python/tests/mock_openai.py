"""A local stand-in for OpenAI's Chat Completions API, for the adapter tests (no network, no key).

It checks requests as the real API does: the path (`POST /v1/chat/completions`; anything else is
404 with OpenAI's error shape), a bearer key (401 `invalid_api_key`), a JSON body with a string
`model` and a non-empty `messages` list whose items have a valid `role` (400
`invalid_request_error` naming the `param`), and `tools` entries of type `function` with a name.
It answers from a script of plans, in order: with a tool call when the request offers a tool named
`final_result…` (PydanticAI's tool output), else as JSON text (structured output). Every request
is kept, so a test can read what the framework sent back to the model.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def _error(status: int, message: str, type_: str, param: str | None = None, code: str | None = None) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": type_, "param": param, "code": code}}


class MockOpenAI:
    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []
        self.rejected: list[tuple[int, dict[str, Any]]] = []
        mock = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(*_error(404, f"Invalid URL (GET {self.path})", "invalid_request_error"))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                status, payload = mock.answer(self.path, self.headers.get("Authorization"), body)
                if status != 200:
                    mock.rejected.append((status, payload))
                self._send(status, payload)

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> MockOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, auth: str | None, raw: bytes) -> tuple[int, dict[str, Any]]:
        if path.split("?")[0] != "/v1/chat/completions":
            return _error(404, f"Invalid URL (POST {path})", "invalid_request_error")
        if not auth or not auth.startswith("Bearer ") or len(auth) <= len("Bearer "):
            return _error(401, "You didn't provide an API key.", "invalid_request_error", None, "invalid_api_key")
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return _error(400, "We could not parse the JSON body of your request.", "invalid_request_error")
        if not isinstance(body, dict):
            return _error(400, "The body must be a JSON object.", "invalid_request_error")
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _error(400, "you must provide a model parameter", "invalid_request_error", "model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "Missing required parameter: 'messages'.", "invalid_request_error", "messages", "missing_required_parameter")
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ROLES:
                return _error(400, f"Invalid value for 'messages[{i}].role'.", "invalid_request_error", f"messages[{i}].role", "invalid_value")
        tools = body.get("tools") or []
        for i, tool in enumerate(tools):
            if tool.get("type") != "function" or not tool.get("function", {}).get("name"):
                return _error(400, f"Missing required parameter: 'tools[{i}].function.name'.", "invalid_request_error", f"tools[{i}].function.name")
        if not self.answers:
            return _error(500, "the mock has no answer left", "server_error")
        self.requests.append(body)
        plan = self.answers.pop(0)
        final = [t["function"]["name"] for t in tools if t["function"]["name"].startswith("final_result")]
        if final:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{
                    "id": f"call_{len(self.requests)}",
                    "type": "function",
                    "function": {"name": final[0], "arguments": json.dumps(plan)},
                }],
            }
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": json.dumps(plan), "refusal": None}
            finish = "stop"
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }
