// An OTLP/HTTP trace receiver on loopback for the end-to-end suite: it takes
// `POST /v1/traces` in OTLP's JSON encoding (what the worker sends) or protobuf, and reads
// every payload with the official OTLP definitions — the .proto files of the
// opentelemetry-proto crate (found through `cargo metadata`), loaded by protobufjs: a
// JSON body must name only the messages' own fields, with the types they have (ids in
// hex, as OTLP/JSON writes them). It can answer 500, or slowly, on purpose.

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
  if (!crate) throw new Error('opentelemetry-proto is not in the workspace (helix-edge\'s dev-dependency)');
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

/** Whether `v` is a JSON value the protobuf JSON mapping allows for scalar `type`. */
const SCALAR = {
  string: (v) => typeof v === 'string',
  bool: (v) => typeof v === 'boolean',
  double: (v) => typeof v === 'number',
  float: (v) => typeof v === 'number',
  int32: Number.isInteger,
  uint32: Number.isInteger,
  int64: (v) => Number.isInteger(v) || (typeof v === 'string' && /^-?\d+$/.test(v)),
  uint64: (v) => Number.isInteger(v) || (typeof v === 'string' && /^\d+$/.test(v)),
  fixed64: (v) => Number.isInteger(v) || (typeof v === 'string' && /^\d+$/.test(v)),
  bytes: (v) => typeof v === 'string',
};

/** Refuses a JSON message with a field its type does not have, or a value of the wrong
 *  JSON type for its field, at any depth. */
function strict(type, obj, path = type.name) {
  for (const [key, value] of Object.entries(obj)) {
    const field = type.fields[key];
    if (!field) throw new Error(`${path}.${key}: no such field`);
    const at = `${path}.${key}`;
    if (field.repeated && !Array.isArray(value)) throw new Error(`${at}: an array expected`);
    const sub = field.resolve().resolvedType;
    for (const [i, item] of (field.repeated ? value : [value]).entries()) {
      const where = field.repeated ? `${at}[${i}]` : at;
      if (sub instanceof protobuf.Type) strict(sub, item, where);
      else if (sub instanceof protobuf.Enum) { if (!Number.isInteger(item)) throw new Error(`${where}: an enum number expected`); }
      else if (SCALAR[field.type] && !SCALAR[field.type](item)) throw new Error(`${where}: not a ${field.type}: ${JSON.stringify(item)}`);
    }
  }
}

/** An OTLP/JSON request as the protobuf JSON mapping has it (ids hex → base64), checked. */
function fromJson(Request, body) {
  const obj = JSON.parse(body);
  const ids = (o) => {
    for (const k of ['traceId', 'spanId', 'parentSpanId']) {
      if (typeof o[k] === 'string') {
        if (!/^([0-9a-f]{2})*$/.test(o[k])) throw new Error(`${k} ${o[k]} is not lower-case hex`);
        o[k] = Buffer.from(o[k], 'hex').toString('base64');
      }
    }
  };
  for (const rs of obj.resourceSpans ?? []) {
    for (const ss of rs.scopeSpans ?? []) {
      for (const span of ss.spans ?? []) {
        ids(span);
        for (const link of span.links ?? []) ids(link);
      }
    }
  }
  strict(Request, obj);
  // The JSON mapping read (64-bit integers from strings), then protobufjs' own check of
  // every field's type.
  const message = Request.fromObject(obj);
  const err = Request.verify(message);
  if (err) throw new Error(err);
  return message;
}

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
    /** Why each payload that was not OTLP was refused. */
    malformed: [],
  };
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    requests++;
    receiver.headers.push(req.headers);
    if (req.method !== 'POST' || req.url !== '/v1/traces') return res.writeHead(404).end();
    if (receiver.mode === 'fail') return res.writeHead(500).end('scripted failure');
    if (receiver.mode === 'slow') await new Promise((r) => setTimeout(r, receiver.slowMs));
    const type = req.headers['content-type'];
    let decoded;
    try {
      if (type === 'application/json') decoded = fromJson(Request, Buffer.concat(chunks).toString('utf8'));
      else if (type === 'application/x-protobuf') decoded = Request.decode(Buffer.concat(chunks));
      else return res.writeHead(415).end();
    } catch (err) {
      receiver.malformed.push(String(err));
      return res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ message: String(err) }));
    }
    for (const rs of decoded.resourceSpans ?? []) {
      const resource = Object.fromEntries((rs.resource?.attributes ?? []).map((a) => [a.key, valueOf(a.value)]));
      for (const ss of rs.scopeSpans ?? []) {
        for (const span of ss.spans ?? []) received.push(flat(span, resource));
      }
    }
    res.writeHead(200, { 'content-type': type }).end(type === 'application/json' ? '{}' : undefined);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${server.address().port}`,
    spans: () => received.slice(),
    requests: () => requests,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  });
}
