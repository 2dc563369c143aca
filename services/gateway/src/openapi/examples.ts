/** Examples for the main operations, keyed by `METHOD path` (a route's own `examples` win). */
const MERCHANT = '3f0e8a52-9c4b-4d7e-8a1f-6b2c9d4e5f01';
const MEMBER = '7b1d2c3e-4f5a-4b6c-9d7e-8f9a0b1c2d03';
const PRODUCT = '5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c04';
const PLAN = '1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e05';
const PAYMENT_METHOD = '9e8d7c6b-5a4f-4e3d-ac1b-0f9e8d7c6b06';
const KEY = '4d5e6f7a-8b9c-4d0e-bf1a-2b3c4d5e6f08';
const AT = '2026-11-22T09:30:00.000Z';

export const EXAMPLES: Record<string, { request?: unknown; responses?: Record<number, unknown> }> = {
  'POST /api/Members': {
    request: { merchantId: MERCHANT, email: 'ada@example.com', firstName: 'Ada', lastName: 'Lovelace', phone: '+61 400 000 000' },
    responses: { 201: { id: MEMBER, merchantId: MERCHANT, email: 'ada@example.com', firstName: 'Ada', lastName: 'Lovelace', phone: '+61 400 000 000', createdAt: AT, updatedAt: AT } },
  },
  'POST /api/Products': {
    request: { merchantId: MERCHANT, name: 'Gym membership', description: 'Unlimited access to every club.' },
    responses: { 201: { id: PRODUCT, merchantId: MERCHANT, name: 'Gym membership', description: 'Unlimited access to every club.', createdAt: AT, updatedAt: AT } },
  },
  'POST /api/Plans': {
    request: { merchantId: MERCHANT, productId: PRODUCT, name: 'Monthly', amount: 49.95, currency: 'AUD', interval: 'Month', intervalCount: 1, trialDays: 14 },
  },
  'POST /api/Subscriptions': {
    request: { merchantId: MERCHANT, memberId: MEMBER, planId: PLAN, paymentMethodId: PAYMENT_METHOD, startDate: '2026-12-01' },
  },
  'PUT /api/ApiKeys/{id}/webhook': {
    request: { id: KEY, merchantId: MERCHANT, webhookUrl: 'https://hooks.example.com/billing', webhookEvents: ['member.created', 'subscription.created'], webhookEnabled: true },
  },
};

