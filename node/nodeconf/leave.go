package nodeconf

// leave is Watch's last step, the interlock still held: when Leaving says
// the agent leaves the node for good, the generated conflist is removed
// (Uninstall, the binaries kept for the pods made through Catena) and the
// primary takes over; otherwise, or when Leaving is nil, every file stays.
func (i *Installer) leave() {
	if i.Leaving == nil {
		return
	}
	gone, why := i.Leaving()
	if !gone {
		i.Log.Info("stopping; the generated conflist stays", "reason", why)
		return
	}
	u, err := Uninstall(i.Fs, i.Cfg.ConfDir, i.Cfg.ConfName, "")
	switch {
	case err != nil:
		i.Log.Error("stopping for good, but the generated conflist could not be removed: run catena-agent uninstall", "reason", why, "error", err)
	case u.Conf == "":
		i.Log.Info("stopping for good; no generated conflist to remove", "reason", why)
	default:
		i.Log.Info("stopping for good: removed the generated conflist, the primary takes over", "reason", why, "removed", u.Conf)
	}
}
