package model

// The validators of role grants (see Site.Validate for their order).

// validateRoles checks every role grant: its role, the pool or boot server it is scoped
// to, and its members.
func (s *Site) validateRoles(ix *siteIndex) error {
	roles := map[string]bool{}
	for i := range s.Roles {
		r := &s.Roles[i]
		if err := ValidName("role", r.Name); err != nil {
			return err
		}
		if roles[r.Name] {
			return conflict("duplicate role %q", r.Name)
		}
		roles[r.Name] = true
		if err := validateRoleScope(r, ix); err != nil {
			return err
		}
		for _, m := range r.Members {
			if err := ValidUID(m); err != nil {
				return invalid("role %s: %v", r.Name, err)
			}
		}
	}
	return nil
}

// validateRoleScope checks a grant's role, and that exactly the pool-scoped roles name a
// pool and only the boot-server role names a boot server, one the site has.
func validateRoleScope(r *RoleGrant, ix *siteIndex) error {
	if !oneOf(r.Role, RoleKinds) {
		return invalid("role %s: unknown role %q (use one of %v)", r.Name, r.Role, RoleKinds)
	}
	if r.Role.PoolScoped() != (r.Pool != "") {
		if r.Pool == "" {
			return invalid("role %s: a %s role needs a pool", r.Name, r.Role)
		}
		return invalid("role %s: a %s role is site-wide and takes no pool", r.Name, r.Role)
	}
	if r.Pool != "" && !ix.pools[r.Pool] {
		return invalid("role %s: unknown pool %q", r.Name, r.Pool)
	}
	switch {
	case r.Role == RoleBootServer && r.BootServer == "":
		return invalid("role %s: a %s role needs a boot server", r.Name, r.Role)
	case r.Role != RoleBootServer && r.BootServer != "":
		return invalid("role %s: only a %s role names a boot server", r.Name, RoleBootServer)
	case r.BootServer != "" && !ix.servers[r.BootServer]:
		return invalid("role %s: unknown boot server %q", r.Name, r.BootServer)
	}
	return nil
}
