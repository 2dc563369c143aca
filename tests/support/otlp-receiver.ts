import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One span as an OTLP/HTTP JSON export carried it, with the service that sent it. */
export interface ReceivedSpan {
  service: string;
  scope: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
}

export const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3, PRODUCER: 4, CONSUMER: 5 } as const;

/**
 * A tiny OTLP/HTTP trace receiver (JSON encoding, `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`)
 * standing in for a collector: services export to `endpoint` and the test reads the spans.
 */
export interface OtlpReceiver {
  /** For `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  endpoint: string;
  spans(): ReceivedSpan[];
  close(): Promise<void>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };

function valueOf(v: AnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  return v.doubleValue ?? '';
}

const attributesOf = (list: { key: string; value: AnyValue }[] = []) => Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

/** Ids arrive as hex in OTLP JSON; base64 is accepted too. */
const hexId = (id: string | undefined) => (!id ? '' : /^[0-9a-f]+$/i.test(id) ? id.toLowerCase() : Buffer.from(id, 'base64').toString('hex'));

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces' && String(req.headers['content-type']).startsWith('application/json')) {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        for (const rs of body.resourceSpans ?? []) {
          const service = String(attributesOf(rs.resource?.attributes)['service.name'] ?? '');
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              received.push({
                service,
                scope: ss.scope?.name ?? '',
                traceId: hexId(s.traceId),
                spanId: hexId(s.spanId),
                parentSpanId: hexId(s.parentSpanId),
                name: s.name,
                kind: s.kind,
                attributes: attributesOf(s.attributes),
              });
            }
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } else {
        res.writeHead(req.url === '/v1/traces' ? 415 : 404).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans: () => [...received],
    close: () => new Promise((r) => server.close(() => r())),
  };
}
