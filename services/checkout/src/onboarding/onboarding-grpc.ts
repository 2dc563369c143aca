import {
  ChooseOnboardingPlanRequest,
  DomainError,
  parseOrThrow,
  SaveOnboardingAnswersRequest,
  SaveOnboardingDetailsRequest,
  SaveOnboardingPaymentMethodRequest,
} from '@billing/contracts';
import type { ServiceImpl } from '@billing/service-runtime';
import { completeOnboarding } from './complete-onboarding.js';
import { acceptInvitation, getOnboardingState, previewInvitation, requireActivePlan, updateOnboarding, type WizardDeps } from './wizard.js';

const refOf = (ref: { accountId: string; invitationId: string } | null) => {
  if (!ref?.accountId) throw new DomainError('bad_request', 'The call names no customer account.');
  return { accountId: ref.accountId, invitationId: ref.invitationId };
};
const orNull = <T>(v: T | undefined): T | null => v ?? null;

export function onboardingGrpc(deps: WizardDeps): ServiceImpl<'checkout.v1.Onboarding'> {
  return {
    PreviewInvitation: async (req) => previewInvitation(deps, req.token),
    AcceptInvitation: async (req) => {
      if (!req.accountId) throw new DomainError('bad_request', 'The call names no customer account.');
      return acceptInvitation(deps, req.accountId, req.token);
    },
    GetOnboarding: async (req) => getOnboardingState(deps, refOf(req)),

    SaveDetails: async (req) => {
      const ref = refOf(req.ref);
      const d = req.details;
      const input = parseOrThrow(SaveOnboardingDetailsRequest, {
        invitationId: ref.invitationId,
        firstName: d?.firstName,
        lastName: d?.lastName,
        phone: d?.phone,
        addressLine1: d?.addressLine1,
        city: d?.city,
        state: d?.state,
        postCode: d?.postCode,
        country: d?.country,
      });
      await updateOnboarding(deps, ref, (o) => {
        o.details = {
          firstName: input.firstName,
          lastName: input.lastName,
          phone: orNull(input.phone ?? undefined),
          addressLine1: orNull(input.addressLine1 ?? undefined),
          city: orNull(input.city ?? undefined),
          state: orNull(input.state ?? undefined),
          postCode: orNull(input.postCode ?? undefined),
          country: orNull(input.country ?? undefined),
        };
      });
      return {};
    },

    SavePaymentMethod: async (req) => {
      const ref = refOf(req.ref);
      const pm = req.paymentMethod;
      const input = parseOrThrow(SaveOnboardingPaymentMethodRequest, {
        invitationId: ref.invitationId,
        type: pm?.type,
        brand: pm?.brand,
        // proto3: an absent last4 arrives as ''.
        last4: pm?.last4 || undefined,
        expiryMonth: pm?.expiryMonth,
        expiryYear: pm?.expiryYear,
        accountName: pm?.accountName,
        bsb: pm?.bsb,
      });
      await updateOnboarding(deps, ref, (o) => {
        o.paymentMethod = {
          type: input.type,
          brand: input.brand ?? null,
          last4: input.last4 ?? null,
          expiryMonth: input.expiryMonth ?? null,
          expiryYear: input.expiryYear ?? null,
          accountName: input.accountName ?? null,
          bsb: input.bsb ?? null,
        };
      });
      return {};
    },

    ChoosePlan: async (req) => {
      const ref = refOf(req.ref);
      const input = parseOrThrow(ChooseOnboardingPlanRequest, { invitationId: ref.invitationId, planId: req.planId });
      await updateOnboarding(deps, ref, async (o, invitation) => {
        const plan = await requireActivePlan(deps.backends, invitation.merchantId, input.planId.toLowerCase());
        o.choosePlan(plan.id, plan.productId);
      });
      return {};
    },

    SaveAnswers: async (req) => {
      const ref = refOf(req.ref);
      const input = parseOrThrow(SaveOnboardingAnswersRequest, {
        invitationId: ref.invitationId,
        answers: req.answers.map((a) => ({ questionId: a.questionId, textValue: a.textValue ?? null, optionIds: a.optionIds })),
      });
      await updateOnboarding(deps, ref, (o) => {
        o.answers = (input.answers ?? []).map((a) => ({ questionId: a.questionId.toLowerCase(), textValue: a.textValue ?? null, optionIds: (a.optionIds ?? []).map((id) => id.toLowerCase()) }));
      });
      return {};
    },

    CompleteOnboarding: async (req) => completeOnboarding(deps, refOf(req)),
  };
}
