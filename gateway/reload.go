package gateway

import (
	"fmt"
	"reflect"

	"github.com/switchboard-gateway/switchboard/channels"
	"github.com/switchboard-gateway/switchboard/channels/registry"
	"github.com/switchboard-gateway/switchboard/config"
	"github.com/switchboard-gateway/switchboard/internal/logging"
)

// LoadConfig loads and validates the configuration at path ("" for
// ./config.yaml, or the defaults and the environment without it).
func LoadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

// Reload re-reads the configuration (Options.ConfigPath) on SIGHUP and applies what can change
// safely while serving: the log level, the channels' allowlists and admins, and the
// skills. Everything else needs a restart, and the log says which keys.
func (g *Gateway) Reload() {
	cfg, err := LoadConfig(g.opts.ConfigPath)
	if err != nil {
		g.log.Error("reload: the configuration has errors; keeping the running one", "err", err)
		return
	}
	if lv, err := logging.ParseLevel(cfg.Log.Level); err == nil && g.opts.Level != nil && lv != g.opts.Level.Level() {
		g.opts.Level.Set(lv)
		g.log.Info("reload: log level changed", "level", cfg.Log.Level)
	}
	for _, name := range registry.Names() {
		old, now := channelAccess(g.cfg, name), channelAccess(cfg, name)
		if !reflect.DeepEqual(old, now) {
			if g.sup != nil {
				g.sup.setAccess(name, now)
			}
			g.log.Info("reload: access rules changed", "channel", name)
		}
	}
	// The running parts keep the old secrets until a restart; new ones
	// (a skill's variable, say) are hidden from now on too.
	g.redact.Update(append(secretsOf(g.cfg), secretsOf(cfg)...))
	reg := g.skills.SetGrants(cfg.Skills.Grants, cfg.Secrets())
	g.log.Info("reload: skills reloaded", "skills", len(reg.Skills()), "problems", len(reg.Problems()))
	if keys := restartKeys(g.cfg, cfg); len(keys) > 0 {
		g.log.Warn("reload: these settings changed but only take effect after a restart", "keys", keys)
	}
	applied := *g.cfg
	applied.Log.Level = cfg.Log.Level
	applied.Channels = g.cfg.Channels.Clone()
	copyAccess(&applied.Channels, &cfg.Channels)
	applied.Skills.Grants = cfg.Skills.Grants
	g.cfg = &applied
}

// restartKeys names the top-level sections (and the channel sections)
// whose settings differ in a way a reload does not apply.
func restartKeys(old, now *config.Config) []string {
	o, n := *old, *now
	// What reload applies is not a difference.
	n.Log.Level = o.Log.Level
	n.Channels = now.Channels.Clone()
	copyAccess(&n.Channels, &o.Channels)
	n.Skills.Grants = o.Skills.Grants
	var keys []string
	ov, nv := reflect.ValueOf(o), reflect.ValueOf(n)
	t := ov.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		if tag == "channels" {
			ct := f.Type
			for j := range ct.NumField() {
				if ct.Field(j).Name == "Sections" {
					for _, name := range registry.Names() {
						if !reflect.DeepEqual(o.Channels.Section(name), n.Channels.Section(name)) {
							keys = append(keys, "channels."+name)
						}
					}
					continue
				}
				if !reflect.DeepEqual(ov.Field(i).Field(j).Interface(), nv.Field(i).Field(j).Interface()) {
					keys = append(keys, "channels."+ct.Field(j).Tag.Get("yaml"))
				}
			}
			continue
		}
		if !reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			keys = append(keys, tag)
		}
	}
	return keys
}

// copyAccess sets the settings a reload applies (each platform's access
// rules: the fields tagged `reload:"access"`) of dst's sections from src's.
func copyAccess(dst, src *config.Channels) {
	for _, name := range registry.Names() {
		if d, s := dst.Section(name), src.Section(name); d != nil && s != nil {
			channels.CopyAccess(d, s)
		}
	}
}
