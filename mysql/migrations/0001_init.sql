-- Fila's tables for MySQL 8.0+ and MariaDB 10.6+. {{p}} is the table-name
-- prefix (validated and quoted by the driver). Times are microseconds since
-- the Unix epoch (UTC) on the server's clock; names are bytes (VARBINARY),
-- compared and sorted bytewise on every server and collation.
CREATE TABLE IF NOT EXISTS `{{p}}messages` (
	-- A UUID's 16 bytes: the key is repeated in every secondary index.
	id BINARY(16) NOT NULL,
	queue VARBINARY(128) NOT NULL,
	kind VARBINARY(255) NOT NULL,
	body LONGBLOB NOT NULL,
	headers MEDIUMBLOB NULL,
	enqueued_at BIGINT NOT NULL,
	-- When the message becomes claimable: its run-at, or its lease deadline.
	-- The default, the server's now, serves a message enqueued without a
	-- delay or run-at: its row in a batch INSERT says DEFAULT instead of an
	-- expression the server parses and evaluates per row.
	visible_at BIGINT NOT NULL DEFAULT (TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6))),
	-- The run-at of a message leased before it (ReceiveDelayed), while that
	-- lease lasts.
	run_at BIGINT NULL,
	attempts INT NOT NULL,
	max_attempts INT NOT NULL,
	dedup_key VARBINARY(512) NULL,
	lease_token BINARY(16) NULL,
	last_error MEDIUMBLOB NULL,
	-- MaxPriority - priority: the claim index is ascending on every server
	-- (MariaDB before 10.8 ignores DESC in an index).
	prank TINYINT NOT NULL,
	PRIMARY KEY (id),
	UNIQUE KEY messages_dedup (queue, dedup_key),
	KEY messages_claim (queue, prank, visible_at, id)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS `{{p}}dead` (
	id BINARY(16) NOT NULL,
	queue VARBINARY(128) NOT NULL,
	kind VARBINARY(255) NOT NULL,
	body LONGBLOB NOT NULL,
	headers MEDIUMBLOB NULL,
	enqueued_at BIGINT NOT NULL,
	attempts INT NOT NULL,
	max_attempts INT NOT NULL,
	dedup_key VARBINARY(512) NULL,
	reason MEDIUMBLOB NOT NULL,
	dead_at BIGINT NOT NULL,
	priority TINYINT NOT NULL,
	PRIMARY KEY (id),
	KEY dead_list (queue, dead_at, id),
	KEY dead_kind (queue, kind)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS `{{p}}marks` (
	queue VARBINARY(128) NOT NULL,
	name VARBINARY(600) NOT NULL,
	expires_at BIGINT NULL,
	PRIMARY KEY (queue, name),
	KEY marks_expiry (queue, expires_at)
) ENGINE=InnoDB;
