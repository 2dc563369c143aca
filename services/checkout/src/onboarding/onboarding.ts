import { EntitySchema } from '@mikro-orm/postgresql';
import { paymentMethodGaps, type OnboardingStep } from '@billing/contracts';
import { validateAnswers, type QuestionForValidation } from './answer-validation.js';

export interface OnboardingDetails {
  firstName: string;
  lastName: string;
  phone: string | null;
  addressLine1: string | null;
  city: string | null;
  state: string | null;
  postCode: string | null;
  country: string | null;
}

/** A tokenisation result: never a full card or account number. */
export interface OnboardingPaymentMethod {
  type: 'Card' | 'BankAccount';
  brand: string | null;
  /** Null in a draft saved without it (only type is required at the step); completion asks for it. */
  last4: string | null;
  expiryMonth: number | null;
  expiryYear: number | null;
  accountName: string | null;
  bsb: string | null;
}

export interface OnboardingAnswer {
  questionId: string;
  textValue: string | null;
  optionIds: string[];
}

/**
 * The wizard draft of an accepted invitation, and the ids its completion produced in billing.
 * The step a reload resumes at is derived from what has been saved, never stored apart from it.
 */
export class Onboarding {
  invitationId!: string;
  accountId!: string;
  details: OnboardingDetails | null = null;
  paymentMethod: OnboardingPaymentMethod | null = null;
  planId: string | null = null;
  productId: string | null = null;
  /** null until the questions step is saved (an empty array is a saved, empty answer set). */
  answers: OnboardingAnswer[] | null = null;
  /** Set (and committed) before the first billing call of completion; a re-run adopts what it made. */
  completionStartedAt: Date | null = null;
  /** While a completion runs: until when it holds the wizard (edits are refused meanwhile). */
  completionLeaseUntil: Date | null = null;
  memberId: string | null = null;
  paymentMethodId: string | null = null;
  subscriptionId: string | null = null;
  completedAt: Date | null = null;
  updatedAt: Date = new Date();

  static start(invitationId: string, accountId: string): Onboarding {
    return Object.assign(new Onboarding(), { invitationId, accountId });
  }

  /**
   * Where the wizard resumes. `questions` are those of the chosen plan's product as they are now
   * (none: no Questions step):
   * saved answers that no longer pass completion's validation (a required question added, an
   * option or a question removed since they were saved) send it back to Questions.
   * `planOffered`: whether the chosen plan is still an active plan of the merchant; one withdrawn
   * since it was chosen sends the wizard back to Plan, as completion would refuse it.
   */
  step(questions: QuestionForValidation[], planOffered = true): OnboardingStep {
    if (this.completedAt) return 'Done';
    if (!this.details) return 'Details';
    if (!this.paymentMethod || Object.keys(paymentMethodGaps(this.paymentMethod)).length) return 'PaymentMethod';
    if (!this.planId || !planOffered) return 'Plan';
    // A product without questions has nothing to answer: the wizard goes on to Review without an answers save.
    const answers = this.answers ?? (questions.length === 0 ? [] : null);
    if (!answers || Object.keys(validateAnswers(questions, answers)).length) return 'Questions';
    return 'Review';
  }

  /** Choosing a plan of another product drops the answers, which were to that product's questions. */
  choosePlan(planId: string, productId: string): void {
    if (this.productId && this.productId !== productId) this.answers = null;
    this.planId = planId;
    this.productId = productId;
    this.touch();
  }

  touch(now = new Date()): void {
    this.updatedAt = now;
  }
}

export const OnboardingSchema = new EntitySchema<Onboarding>({
  class: Onboarding,
  tableName: 'onboardings',
  properties: {
    invitationId: { type: 'uuid', primary: true },
    accountId: { type: 'uuid' },
    details: { type: 'json', nullable: true },
    paymentMethod: { type: 'json', nullable: true },
    planId: { type: 'uuid', nullable: true },
    productId: { type: 'uuid', nullable: true },
    answers: { type: 'json', nullable: true },
    completionStartedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    completionLeaseUntil: { type: 'Date', columnType: 'timestamptz', nullable: true },
    memberId: { type: 'uuid', nullable: true },
    paymentMethodId: { type: 'uuid', nullable: true },
    subscriptionId: { type: 'uuid', nullable: true },
    completedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
