import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { compareQuestions, Question } from './question.js';
import { applyQuestionOrder } from './question-order.js';

function questions(n: number): Question[] {
  return Array.from({ length: n }, (_, i) =>
    Question.create({ merchantId: 'm', productId: 'p', text: `Q${i}`, kind: 'Text', required: false, order: i + 1, optionLabels: [] }),
  );
}

function errorsOf(fn: () => void, code = 'validation_failed'): Record<string, string[]> | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof DomainError && e.code === code) return e.extensions.errors;
    throw e;
  }
  return undefined;
}

describe('applyQuestionOrder', () => {
  it('moves the listed questions and leaves the others untouched', () => {
    const [a, b, c] = questions(3) as [Question, Question, Question];
    applyQuestionOrder([a, b, c], [{ id: c.id, order: 0 }, { id: a.id, order: 5 }]);
    expect([a.order, b.order, c.order]).toEqual([5, 2, 0]);
    expect([a, b, c].sort(compareQuestions).map((q) => q.text)).toEqual(['Q2', 'Q1', 'Q0']);
  });

  it('breaks ties by id', () => {
    const qs = questions(3);
    applyQuestionOrder(qs, qs.map((q) => ({ id: q.id, order: 7 })));
    expect([...qs].sort(compareQuestions).map((q) => q.id)).toEqual(qs.map((q) => q.id).sort());
  });

  it('answers not found naming every id that is not a question of the product, and changes nothing', () => {
    const [a, b] = questions(2) as [Question, Question];
    const [foreign, other] = questions(2) as [Question, Question];
    const errors = errorsOf(() => applyQuestionOrder([a, b], [{ id: a.id, order: 9 }, { id: foreign.id, order: 1 }, { id: other.id, order: 3 }]), 'not_found');
    expect(Object.keys(errors ?? {}).sort()).toEqual(['orders[1].id', 'orders[2].id']);
    expect(a.order).toBe(1);
  });

  it('refuses an id listed twice (400 naming it), and changes nothing', () => {
    const [a, b] = questions(2) as [Question, Question];
    const errors = errorsOf(() => applyQuestionOrder([a, b], [{ id: a.id, order: 9 }, { id: b.id, order: 1 }, { id: a.id, order: 3 }]));
    expect(Object.keys(errors ?? {})).toEqual(['orders[2].id']);
    expect([a.order, b.order]).toEqual([1, 2]);
  });

  it('refuses an empty list', () => {
    expect(Object.keys(errorsOf(() => applyQuestionOrder(questions(1), [])) ?? {})).toEqual(['orders']);
  });

  it('matches ids case-insensitively', () => {
    const [a] = questions(1) as [Question];
    applyQuestionOrder([a], [{ id: a.id.toUpperCase(), order: 4 }]);
    expect(a.order).toBe(4);
  });
});

describe('Question.create', () => {
  it('requires options on choice questions and none on text questions', () => {
    const base = { merchantId: 'm', productId: 'p', text: 'Q', required: true, order: 1 };
    expect(errorsOf(() => Question.create({ ...base, kind: 'SingleChoice', optionLabels: [] }))).toHaveProperty('options');
    expect(errorsOf(() => Question.create({ ...base, kind: 'Text', optionLabels: ['x'] }))).toHaveProperty('options');
    const q = Question.create({ ...base, kind: 'MultiChoice', optionLabels: ['a', 'b'] });
    expect(q.options.map((o) => o.label)).toEqual(['a', 'b']);
    expect(new Set(q.options.map((o) => o.id)).size).toBe(2);
  });
});
