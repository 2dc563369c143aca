// The page's stand-in for a payment provider's tokenisation: card or bank details become the
// result the API stores (brand, last 4, expiry; or account name, BSB, last 4). The full number
// is checked here and never sent.

export type Tokenised =
  | { type: 'Card'; brand: string; last4: string; expiryMonth: number; expiryYear: number }
  | { type: 'BankAccount'; accountName: string; bsb: string; last4: string };

type Result = { method: Tokenised } | { errors: Record<string, string[]> };

export function isLuhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return digits.length > 0 && sum % 10 === 0;
}

/** The card network from the number's leading digits. */
export function cardBrand(digits: string): string | undefined {
  if (/^4/.test(digits)) return 'Visa';
  if (/^(5[1-5]|2[2-7])/.test(digits)) return 'Mastercard';
  if (/^3[47]/.test(digits)) return 'American Express';
  if (/^6/.test(digits)) return 'Discover';
  return undefined;
}

export function tokeniseCard(number: string, month: string, year: string, now = new Date()): Result {
  const errors: Record<string, string[]> = {};
  const digits = number.replace(/[\s-]/g, '');
  if (!/^\d{12,19}$/.test(digits)) errors.cardNumber = ['Enter the 12 to 19 digits of the card number.'];
  else if (!isLuhnValid(digits)) errors.cardNumber = ['This card number does not look right; check it.'];
  const m = Number(month);
  if (!/^\d{1,2}$/.test(month.trim()) || m < 1 || m > 12) errors.expiryMonth = ['Enter the expiry month, 01 to 12.'];
  const y = Number(year.trim().length === 2 ? `20${year.trim()}` : year.trim());
  if (!/^\d{2}(\d{2})?$/.test(year.trim())) errors.expiryYear = ['Enter the expiry year, e.g. 2029.'];
  else if (!errors.expiryMonth && y * 12 + m < now.getFullYear() * 12 + now.getMonth() + 1) errors.expiryYear = ['This card has expired.'];
  if (Object.keys(errors).length) return { errors };
  return { method: { type: 'Card', brand: cardBrand(digits) ?? 'Card', last4: digits.slice(-4), expiryMonth: m, expiryYear: y } };
}

export function tokeniseBank(accountName: string, bsb: string, accountNumber: string): Result {
  const errors: Record<string, string[]> = {};
  if (!accountName.trim()) errors.accountName = ['Enter the name on the account.'];
  if (!/^\d{3}-?\d{3}$/.test(bsb.trim())) errors.bsb = ['Enter the 6-digit BSB, e.g. 062-000.'];
  const digits = accountNumber.replace(/[\s-]/g, '');
  if (!/^\d{5,9}$/.test(digits)) errors.accountNumber = ['Enter the 5 to 9 digits of the account number.'];
  if (Object.keys(errors).length) return { errors };
  const b = bsb.trim().replace('-', '');
  return { method: { type: 'BankAccount', accountName, bsb: `${b.slice(0, 3)}-${b.slice(3)}`, last4: digits.slice(-4) } };
}
