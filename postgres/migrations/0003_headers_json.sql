-- Fila schema version 3: headers as json, not jsonb.
--
-- jsonb cannot hold the character U+0000, which a header value may contain;
-- json keeps the text exactly as written.
ALTER TABLE {{schema}}.messages ALTER COLUMN headers TYPE json USING headers::json;
ALTER TABLE {{schema}}.dead ALTER COLUMN headers TYPE json USING headers::json;
