package stores

func openFile(u *URL) (Store, error) { return nil, u.errorf("not yet") }
