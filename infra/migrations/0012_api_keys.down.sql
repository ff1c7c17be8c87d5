-- Loses every API key: processes that require keys answer 401 to every
-- authenticated route until the table is back and keys are created again.
DROP TABLE api_keys;
