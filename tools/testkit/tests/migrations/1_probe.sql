CREATE TABLE probe (id bigint PRIMARY KEY, note text NOT NULL);
