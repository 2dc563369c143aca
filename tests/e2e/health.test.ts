import { describe, expect, it } from 'vitest';
import { gateway } from '../support/e2e.js';

const http = gateway();

describe('gateway health and routing', () => {
  it('answers GET /health with 200', async () => {
    const res = await http('GET', '/health');
    expect(res.status).toBe(200);
  });

  it('answers an unknown route with 404 problem details', async () => {
    const res = await http('GET', '/api/does-not-exist');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 404 });
  });
});
