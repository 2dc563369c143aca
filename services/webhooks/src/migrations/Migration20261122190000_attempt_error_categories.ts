import { Migration } from '@mikro-orm/migrations';

/**
 * Attempts stored raw error text (an internal port scanner for whoever reads them); they now
 * store a category. Old rows are mapped to the category their text names; a refused address
 * keeps no response body.
 */
export class Migration20261122190000_attempt_error_categories extends Migration {
  override async up(): Promise<void> {
    this.addSql(`update "attempts" set "error" = case
      when "error" in ('timeout', 'connection_refused', 'tls_error', 'dns_error', 'address_refused', 'http_status') then "error"
      when "error" like 'No 2xx response within%' or "error" like 'ETIMEDOUT%' then 'timeout'
      when "error" like 'Redirects are not followed%' then 'http_status'
      when "error" like 'ENOTFOUND%' or "error" like 'EAI_%' then 'dns_error'
      when "error" like '%loopback, private or link-local%' or "error" like 'Only http%' or "error" like 'Only https%' or "error" = 'Invalid URL.' then 'address_refused'
      when "error" ~* '(ssl|tls|cert)' then 'tls_error'
      else 'connection_refused' end
      where "error" is not null`);
    this.addSql(`update "attempts" set "error" = 'http_status' where "error" is null and "status_code" is not null and ("status_code" < 200 or "status_code" >= 300)`);
    this.addSql(`update "attempts" set "response_body" = null where "error" = 'address_refused'`);
  }
}
