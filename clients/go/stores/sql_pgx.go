// The pgx connection config the PostgreSQL store opens database/sql with.
package stores

import "github.com/jackc/pgx/v5"

type pgxConnConfig = pgx.ConnConfig

func parsePgxConfig(dsn string) (*pgx.ConnConfig, error) { return pgx.ParseConfig(dsn) }
