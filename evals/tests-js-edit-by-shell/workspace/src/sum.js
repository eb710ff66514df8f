/**
 * The sum of an array of numbers (0 for an empty array).
 * @param {number[]} numbers
 * @returns {number}
 */
export function sum(numbers) {
  let total = 0;
  for (let i = 1; i < numbers.length; i++) {
    total += numbers[i];
  }
  return total;
}

/**
 * The mean of a non-empty array of numbers.
 * @param {number[]} numbers
 * @returns {number}
 */
export function mean(numbers) {
  if (numbers.length === 0) {
    throw new RangeError('mean of an empty array');
  }
  return sum(numbers) / numbers.length;
}
