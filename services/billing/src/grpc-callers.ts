import type { CallerRules } from '@billing/service-runtime';

/**
 * Who may call billing, by the service named in the caller's verified certificate: the gateway
 * everything but provider tokens and enrolments, checkout (which completes onboarding and
 * hosted checkout) only the methods its flows use: the reads of merchants, plans and questions,
 * provider tokens, and the enrolment that completes a customer's sign-up.
 */
export const BILLING_CALLERS: CallerRules = {
  'billing.v1.Merchants': ['gateway'],
  'billing.v1.Merchants/GetMerchant': ['gateway', 'checkout'],
  'billing.v1.Products': ['gateway'],
  'billing.v1.Questions': ['gateway'],
  'billing.v1.Questions/ListQuestions': ['gateway', 'checkout'],
  'billing.v1.Plans': ['gateway'],
  'billing.v1.Plans/GetPlan': ['gateway', 'checkout'],
  'billing.v1.Plans/ListPlans': ['gateway', 'checkout'],
  'billing.v1.Members': ['gateway'],
  'billing.v1.PaymentMethods': ['gateway'],
  'billing.v1.ProviderTokens': ['checkout'],
  'billing.v1.Subscriptions': ['gateway'],
  'billing.v1.Answers': ['gateway'],
  'billing.v1.Enrolments': ['checkout'],
  'billing.v1.BillingRuns': ['gateway'],
  'billing.v1.Transactions': ['gateway'],
  'billing.v1.FeeStatements': ['gateway'],
};
