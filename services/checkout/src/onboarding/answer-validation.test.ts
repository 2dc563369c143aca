import { describe, expect, it } from 'vitest';
import { validateAnswers } from './answer-validation.js';

const text = { id: 'q-text', kind: 'Text', required: true, options: [] };
const single = { id: 'q-single', kind: 'SingleChoice', required: true, options: [{ id: 'o1' }, { id: 'o2' }] };
const multi = { id: 'q-multi', kind: 'MultiChoice', required: false, options: [{ id: 'o3' }, { id: 'o4' }] };
const questions = [text, single, multi];
const answer = (questionId: string, textValue: string | null, optionIds: string[] = []) => ({ questionId, textValue, optionIds });

describe('validateAnswers', () => {
  it('accepts a complete answer set, with the optional question left out', () => {
    expect(validateAnswers(questions, [answer('q-text', 'why'), answer('q-single', null, ['o2'])])).toEqual({});
  });

  it('names each required question without an answer at its question', () => {
    expect(Object.keys(validateAnswers(questions, [answer('q-text', '   ')]))).toEqual(['answers.q-text', 'answers.q-single']);
  });

  it('refuses two options on a single choice, an option of another question and text on a choice', () => {
    const errors = validateAnswers(questions, [answer('q-text', 'x'), answer('q-single', null, ['o1', 'o2']), answer('q-multi', 'text', ['o1'])]);
    expect(Object.keys(errors)).toEqual(['answers.q-single', 'answers.q-multi']);
    expect(errors['answers.q-multi']).toEqual(['A choice question takes options, not text.', 'An option is not one of this question.']);
  });

  it('refuses an answer to a question not of the product', () => {
    expect(Object.keys(validateAnswers(questions, [answer('q-text', 'x'), answer('q-single', null, ['o1']), answer('elsewhere', 'x')]))).toEqual(['answers.elsewhere']);
  });
});
