import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';
import { DomainError, type QuestionKind } from '@billing/contracts';

export interface QuestionOption {
  id: string;
  label: string;
}

/** An onboarding question of a product; choice questions carry their options as value objects. */
export class Question {
  id: string = randomUUID();
  merchantId!: string;
  productId!: string;
  text!: string;
  kind!: QuestionKind;
  required = false;
  /** Display position among the product's questions; ties are broken by id. */
  order!: number;
  options: QuestionOption[] = [];
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  static create(input: { merchantId: string; productId: string; text: string; kind: QuestionKind; required: boolean; order: number; optionLabels: string[] }): Question {
    if (input.kind === 'Text' && input.optionLabels.length) throw DomainError.field('options', 'Text questions have no options.');
    if (input.kind !== 'Text' && !input.optionLabels.length) throw DomainError.field('options', `${input.kind} questions need at least one option.`);
    return Object.assign(new Question(), {
      merchantId: input.merchantId,
      productId: input.productId,
      text: input.text,
      kind: input.kind,
      required: input.required,
      order: input.order,
      options: input.optionLabels.map((label) => ({ id: randomUUID(), label })),
    });
  }

  moveTo(order: number, now = new Date()): void {
    if (order === this.order) return;
    this.order = order;
    this.updatedAt = now;
  }

  toMessage() {
    return {
      id: this.id,
      merchantId: this.merchantId,
      productId: this.productId,
      text: this.text,
      kind: this.kind,
      required: this.required,
      order: this.order,
      options: this.options,
      createdAt: this.createdAt.toISOString(),
    };
  }
}

/** Display order: by `order`, then by id. */
export function compareQuestions(a: Question, b: Question): number {
  return a.order - b.order || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

export const QuestionSchema = new EntitySchema<Question>({
  class: Question,
  tableName: 'questions',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    productId: { type: 'uuid' },
    text: { type: 'text' },
    kind: { type: 'string' },
    required: { type: 'boolean' },
    order: { type: 'integer', fieldName: 'display_order' },
    options: { type: 'json' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
