package stores

import "context"

func openSQLite(ctx context.Context, u *URL) (Store, error) { return nil, u.errorf("not yet") }
func openPostgres(ctx context.Context, u *URL) (Store, error) { return nil, u.errorf("not yet") }
func openFile(u *URL) (Store, error)                       { return nil, u.errorf("not yet") }
