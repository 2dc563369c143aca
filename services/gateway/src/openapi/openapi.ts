import { z, type ZodType } from 'zod';
import { ProblemDetails } from '@billing/contracts';
import type { RouteSpec } from '../http/route.js';
import { API_DECISIONS } from './decisions.js';

const REF_BASE = '#/components/schemas/';

/** JSON Schema of one zod schema, with named (registered) schemas as component references. */
function schemaOf(schema: ZodType, io: 'input' | 'output'): unknown {
  const id = z.globalRegistry.get(schema)?.id;
  if (id) return { $ref: REF_BASE + id };
  const { $schema: _s, $defs: _d, ...json } = z.toJSONSchema(schema, { unrepresentable: 'any', io }) as Record<string, unknown>;
  return JSON.parse(JSON.stringify(json).replaceAll('"#/$defs/', `"${REF_BASE}`));
}

/** Query or path parameters of an object schema. */
function parametersOf(schema: ZodType | undefined, where: 'path' | 'query'): unknown[] {
  if (!schema) return [];
  const json = z.toJSONSchema(schema, { unrepresentable: 'any', io: 'input' }) as { properties?: Record<string, unknown>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, s]) => ({ name, in: where, required: where === 'path' || (json.required ?? []).includes(name), schema: s }));
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 400: 'Validation failed', 401: 'Missing or invalid credential', 403: 'Forbidden', 404: 'Not found',
  409: 'Conflict', 410: 'Gone', 413: 'Payload too large', 415: 'Unsupported media type', 422: 'Unprocessable', 429: 'Too many requests', 500: 'Internal error', 502: 'Payment provider unavailable', 503: 'Service unavailable',
};

/** The OpenAPI 3.1 document, generated from the same zod schemas the gateway validates with. */
export function buildOpenApi(routes: RouteSpec[], version: string): Record<string, unknown> {
  const { schemas } = z.toJSONSchema(z.globalRegistry, { unrepresentable: 'any', uri: (id) => REF_BASE + id }) as { schemas: Record<string, Record<string, unknown>> };
  for (const s of Object.values(schemas)) delete s.$schema;
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.url.replace(/:(\w+)/g, '{$1}');
    const responses: Record<string, unknown> = {};
    const statuses = new Set([...Object.keys(r.responses).map(Number), ...('anonymous' in r.auth ? [] : [401]), 400, 429, 500, 503]);
    for (const status of [...statuses].sort()) {
      const schema = r.responses[status];
      const description = STATUS_TEXT[status] ?? String(status);
      if (status >= 400) responses[status] = { description, content: { 'application/problem+json': { schema: { $ref: `${REF_BASE}ProblemDetails` } } } };
      else if (schema) responses[status] = { description, content: { 'application/json': { schema: schemaOf(schema, 'output') } } };
      else responses[status] = { description };
    }
    const parameters = [...parametersOf(r.params, 'path'), ...parametersOf(r.query, 'query')];
    if (r.idempotent) parameters.push({ name: 'Idempotency-Key', in: 'header', required: true, schema: { type: 'string', minLength: 1, maxLength: 255 } });
    (paths[path] ??= {})[r.method.toLowerCase()] = {
      tags: [r.tag],
      summary: r.summary,
      description: r.description,
      security: 'anonymous' in r.auth ? [] : [{ bearer: [] }],
      'x-auth': r.auth,
      parameters: parameters.length ? parameters : undefined,
      requestBody: r.body ? { required: true, content: { 'application/json': { schema: schemaOf(r.body, 'input') } } } : undefined,
      responses,
    };
  }
  void ProblemDetails;
  return {
    openapi: '3.1.0',
    info: { title: 'Subscription Billing Platform API', version, description: API_DECISIONS },
    servers: [{ url: '/' }],
    components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } }, schemas },
    paths,
  };
}

/** A self-contained reference page rendering the OpenAPI document (no external assets). */
export const DOCS_HTML = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Billing Platform API</title>
<style>body{font:14px/1.5 system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
code,pre{background:#f4f4f4;border-radius:4px}pre{padding:.6em;overflow:auto;font-size:12px}
.op{border:1px solid #ddd;border-radius:6px;margin:.6em 0;padding:.3em .8em}.m{font-weight:700;display:inline-block;width:5em}
summary{cursor:pointer}h2{border-bottom:1px solid #ddd}</style></head><body>
<h1>Subscription Billing Platform API</h1><p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI 3.1).</p>
<div id="intro"></div><div id="ops">Loading…</div>
<script>
fetch('/openapi.json').then(r=>r.json()).then(doc=>{
  const esc=s=>String(s??'').replace(/[&<>]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;'}[c]));
  document.getElementById('intro').innerHTML='<pre style="white-space:pre-wrap;background:none">'+esc(doc.info.description)+'</pre>';
  const byTag={};
  for(const [p,ops] of Object.entries(doc.paths))for(const [m,op] of Object.entries(ops))(byTag[op.tags[0]]??=[]).push({p,m,op});
  let html='';
  for(const [tag,ops] of Object.entries(byTag)){html+='<h2>'+esc(tag)+'</h2>';
    for(const {p,m,op} of ops){html+='<details class="op"><summary><span class="m">'+m.toUpperCase()+'</span><code>'+esc(p)+'</code> — '+esc(op.summary)+'</summary>'
      +(op.description?'<p>'+esc(op.description)+'</p>':'')+'<p>Auth: <code>'+esc(JSON.stringify(op['x-auth']))+'</code></p>'
      +(op.parameters?'<p>Parameters</p><pre>'+esc(JSON.stringify(op.parameters,null,2))+'</pre>':'')
      +(op.requestBody?'<p>Body</p><pre>'+esc(JSON.stringify(op.requestBody.content['application/json'].schema,null,2))+'</pre>':'')
      +'<p>Responses: '+Object.keys(op.responses).join(', ')+'</p></details>';}}
  html+='<h2>Schemas</h2><pre>'+esc(JSON.stringify(doc.components.schemas,null,2))+'</pre>';
  document.getElementById('ops').innerHTML=html;});
</script></body></html>`;
