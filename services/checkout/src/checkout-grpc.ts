import { requireMerchantScope, type ServiceImpl } from '@billing/service-runtime';
import type { SessionCompletion } from './completion/complete-session.js';
import type { Links } from './links/links.js';
import type { Sessions } from './sessions/sessions.js';

/** The merchant a session call acts for: checkout sessions and links belong to exactly one merchant. */
const merchantOf = requireMerchantScope;

const orNull = (v: string | undefined) => (v === undefined || v === '' ? null : v);

/** `checkout.v1.Checkout`: decode, call the use case, encode. */
export function checkoutGrpc(links: Links, sessions: Sessions, completion: SessionCompletion): ServiceImpl<'checkout.v1.Checkout'> {
  return {
    CreateLink: async (req) => {
      const c = req.customer;
      const customer = c ? { email: orNull(c.email), firstName: orNull(c.firstName), lastName: orNull(c.lastName), phone: orNull(c.phone) } : undefined;
      const hasCustomer = customer && Object.values(customer).some((v) => v !== null);
      return links.create({
        merchantId: merchantOf(req.scope),
        apiKeyId: req.apiKeyId,
        planId: req.planId,
        returnUrl: req.returnUrl,
        customer: hasCustomer ? customer : undefined,
        expiresInMinutes: req.expiresInMinutes,
      });
    },
    ResolveLink: async (req) => links.resolve(req.d, req.s),
    GetSession: async (req) => sessions.view(merchantOf(req.scope), req.sessionId),
    UpdateSessionCustomer: async (req) => {
      // Absent, the phone is kept (the link's signed one, say); null clears it.
      const phone = req.phoneCleared ? { phone: null } : req.phone === undefined ? {} : { phone: req.phone };
      await sessions.updateCustomer(merchantOf(req.scope), req.sessionId, { email: req.email, firstName: req.firstName, lastName: req.lastName, ...phone });
      return {};
    },
    CaptureBank: async (req) => ({
      providerToken: await sessions.captureBank(merchantOf(req.scope), req.sessionId, { accountName: req.accountName, bsb: req.bsb, accountNumber: req.accountNumber }),
    }),
    CompleteSession: async (req) => completion.complete(merchantOf(req.scope), req.sessionId, req.providerToken),
  };
}
