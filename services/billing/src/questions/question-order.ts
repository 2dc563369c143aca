import { DomainError, type FieldErrors } from '@billing/contracts';
import type { Question } from './question.js';

/**
 * Applies a bulk display-order change to a product's questions: each listed question gets its
 * `order`; questions not listed keep theirs. Nothing changes unless every entry is valid: at
 * least one entry, each id a question of the product (`questions`; else not found), listed
 * once. Invalid entries are reported as `orders[i].id`.
 */
export function applyQuestionOrder(questions: Question[], orders: ReadonlyArray<{ id: string; order: number }>, now = new Date()): void {
  if (orders.length === 0) throw DomainError.field('orders', 'At least one item is required.');
  const byId = new Map(questions.map((q) => [q.id.toLowerCase(), q]));
  const missing: FieldErrors = {};
  const errors: FieldErrors = {};
  const seen = new Set<string>();
  orders.forEach((o, i) => {
    const id = o.id.toLowerCase();
    if (!byId.has(id)) missing[`orders[${i}].id`] = ['Not a question of this product.'];
    else if (seen.has(id)) errors[`orders[${i}].id`] = ['Each question may be listed only once.'];
    else if (!Number.isInteger(o.order)) errors[`orders[${i}].order`] = ['Must be a whole number.'];
    seen.add(id);
  });
  // A question that is not the product's (unknown, another product's or another merchant's) is
  // not found, as the product itself would be; the fields naming it are in `errors` all the same.
  const named = Object.keys(missing);
  if (named.length) throw new DomainError('not_found', `Question not found for this product: ${named.join(', ')}.`, { errors: missing });
  if (Object.keys(errors).length) throw DomainError.validation(errors, 'The order list is not valid.');
  for (const o of orders) byId.get(o.id.toLowerCase())!.moveTo(o.order, now);
}
