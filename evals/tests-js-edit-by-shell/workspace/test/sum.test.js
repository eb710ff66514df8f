import { test } from 'node:test';
import assert from 'node:assert/strict';

import { sum } from '../src/sum.js';

test('sum adds every number', () => {
  assert.equal(sum([1, 2, 3]), 6);
});

test('sum of an empty array is 0', () => {
  assert.equal(sum([]), 0);
});
