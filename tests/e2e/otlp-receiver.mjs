// An OTLP/HTTP trace receiver on loopback for the end-to-end suite: it takes
// `POST /v1/traces` (protobuf) and decodes every payload with the official OTLP
// definitions — the .proto files of the opentelemetry-proto crate the worker encodes
// with (found through `cargo metadata`), loaded by protobufjs. It can answer 500, or
// slowly, on purpose.

import { createServer } from 'node:http';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import protobuf from 'protobufjs';

/** The directory of the OTLP .proto files (opentelemetry/proto/…). */
function protoDir() {
  const meta = JSON.parse(execFileSync('cargo', ['metadata', '--format-version', '1', '--locked'], {
    cwd: new URL('../..', import.meta.url).pathname, maxBuffer: 64 << 20,
  }));
  const crate = meta.packages.find((p) => p.name === 'opentelemetry-proto');
  if (!crate) throw new Error('opentelemetry-proto is not in the build (feature otel)');
  return join(dirname(crate.manifest_path), 'src', 'proto', 'opentelemetry-proto');
}

/** The decoder of `ExportTraceServiceRequest`. */
function requestType() {
  const dir = protoDir();
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(dir, target);
  root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', { keepCase: false });
  return root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
}

const hex = (b) => Buffer.from(b ?? []).toString('hex');

/** An attribute's value (`AnyValue`, by the member its oneof `value` holds), as JSON
 *  would have it. */
function valueOf(any) {
  switch (any?.value) {
    case 'stringValue': return any.stringValue;
    case 'intValue': return Number(any.intValue.toString());
    case 'boolValue': return any.boolValue;
    case 'doubleValue': return any.doubleValue;
    case 'arrayValue': return (any.arrayValue.values ?? []).map(valueOf);
    default: return undefined;
  }
}

/** One decoded span, flattened: ids in hex, times in ms, attributes as an object. */
function flat(span, resource) {
  return {
    traceId: hex(span.traceId),
    spanId: hex(span.spanId),
    parentSpanId: span.parentSpanId?.length ? hex(span.parentSpanId) : undefined,
    name: span.name,
    kind: span.kind,
    startMs: Number(BigInt(span.startTimeUnixNano.toString()) / 1_000_000n),
    endMs: Number(BigInt(span.endTimeUnixNano.toString()) / 1_000_000n),
    attributes: Object.fromEntries((span.attributes ?? []).map((a) => [a.key, valueOf(a.value)])),
    links: (span.links ?? []).map((l) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
    status: span.status?.code ?? 0,
    resource,
  };
}

/** Starts the receiver: `spans()` are every span received, `mode` what it answers. */
export async function startOtlpReceiver() {
  const Request = requestType();
  const received = [];
  let requests = 0;
  const receiver = {
    /** `ok`, `fail` (500) or `slow` (answers after `slowMs`). */
    mode: 'ok',
    slowMs: 15_000,
    headers: [],
  };
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    requests++;
    receiver.headers.push(req.headers);
    if (req.method !== 'POST' || req.url !== '/v1/traces') return res.writeHead(404).end();
    if (receiver.mode === 'fail') return res.writeHead(500).end('scripted failure');
    if (receiver.mode === 'slow') await new Promise((r) => setTimeout(r, receiver.slowMs));
    if (req.headers['content-type'] !== 'application/x-protobuf') return res.writeHead(415).end();
    const decoded = Request.decode(Buffer.concat(chunks));
    for (const rs of decoded.resourceSpans ?? []) {
      const resource = Object.fromEntries((rs.resource?.attributes ?? []).map((a) => [a.key, valueOf(a.value)]));
      for (const ss of rs.scopeSpans ?? []) {
        for (const span of ss.spans ?? []) received.push(flat(span, resource));
      }
    }
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${server.address().port}`,
    spans: () => received.slice(),
    requests: () => requests,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  });
}
