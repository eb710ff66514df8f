#!/usr/bin/env python3
"""An OTLP/HTTP trace receiver that decodes what pev sends with the official protobuf classes
(the `opentelemetry-proto` package), checks it, and writes each span as one JSON line.

    python3 -m venv /tmp/otel && /tmp/otel/bin/pip install opentelemetry-proto
    /tmp/otel/bin/python scripts/real-clients/otlp_receiver.py 4318 spans.jsonl &
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 pev agent "…" -w examples/agent/site

It answers 200 with an empty ExportTraceServiceResponse, as a collector does; a body that does
not decode gets 400. `scripts/real-clients/otlp.sh` runs the whole check.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

OUT = sys.argv[2] if len(sys.argv) > 2 else "spans.jsonl"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
            self.send_response(404 if self.path != "/v1/traces" else 415)
            self.end_headers()
            return
        request = trace_service_pb2.ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except Exception as e:  # noqa: BLE001 - any decode error is the client's
            self.send_response(400)
            self.end_headers()
            self.wfile.write(str(e).encode())
            return
        with open(OUT, "a", encoding="utf-8") as out:
            for rs in request.resource_spans:
                resource = {kv.key: MessageToDict(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        d = MessageToDict(span)
                        d["resource"] = resource
                        d["scope"] = ss.scope.name
                        d["schemaUrl"] = ss.schema_url
                        out.write(json.dumps(d) + "\n")
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
