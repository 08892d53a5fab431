-- Fila schema version 4: marks.
--
-- A mark is a small named flag of a queue with an optional expiry
-- (backend.Marker): queue pause, periodic jobs, cancel by id and
-- unique-for-a-period dedup keys are built on them. until is the expiry
-- (NULL: never); a mark whose until has passed by the server's clock does
-- not exist, whether or not its row was deleted yet. Names sort bytewise
-- (COLLATE "C"), so the primary key serves MarkList's prefix range in the
-- order it returns.
CREATE TABLE {{schema}}.marks (
    queue text COLLATE "C" NOT NULL,
    name  text COLLATE "C" NOT NULL,
    until timestamptz,
    PRIMARY KEY (queue, name)
);

-- Finds a queue's expired marks, which MarkSet and MarkList delete.
CREATE INDEX marks_expiry ON {{schema}}.marks (queue, until) WHERE until IS NOT NULL;
