package ldapstore

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestUsersListDeleteSetPassword(t *testing.T) {
	st, _ := initStore(t)
	for _, u := range []model.User{{UID: "carol", Name: "Carol C."}, {UID: "bob", Name: "bob"}} {
		if err := st.PutUser(bg, u.UID, u.Name, u.UID+"-secret"); err != nil {
			t.Fatal(err)
		}
	}
	users, err := st.Users(bg)
	if err != nil {
		t.Fatal(err)
	}
	// initStore's admin is there too; the list is sorted by uid.
	if !slices.IsSortedFunc(users, func(a, b model.User) int { return strings.Compare(a.UID, b.UID) }) ||
		!slices.Contains(users, model.User{UID: "carol", Name: "Carol C."}) || !slices.Contains(users, model.User{UID: "bob", Name: "bob"}) {
		t.Fatalf("users %+v", users)
	}

	if err := st.SetPassword(bg, "bob", "bob-new-secret"); err != nil {
		t.Fatal(err)
	}
	if err := st.Authenticate(bg, "bob", "bob-secret"); !errors.Is(err, ErrInvalidCredentials) {
		t.Errorf("old password after SetPassword: %v", err)
	}
	if err := st.Authenticate(bg, "bob", "bob-new-secret"); err != nil {
		t.Errorf("new password: %v", err)
	}

	if err := st.DeleteUser(bg, "carol"); err != nil {
		t.Fatal(err)
	}
	if err := st.Authenticate(bg, "carol", "carol-secret"); !errors.Is(err, ErrInvalidCredentials) {
		t.Errorf("deleted user authenticates: %v", err)
	}
	for name, err := range map[string]error{
		"delete unknown":       st.DeleteUser(bg, "carol"),
		"set password unknown": st.SetPassword(bg, "nobody", "long-enough"),
	} {
		if !errors.Is(err, ErrUnknownUser) || !isNotFound(err) {
			t.Errorf("%s: %v, want ErrUnknownUser", name, err)
		}
	}
	var inv *model.InvalidError
	for name, err := range map[string]error{
		"delete malformed":       st.DeleteUser(bg, "Carol C"),
		"set password malformed": st.SetPassword(bg, "bob*", "x"),
		"empty password":         st.SetPassword(bg, "bob", ""),
	} {
		if !errors.As(err, &inv) {
			t.Errorf("%s: %v, want an InvalidError", name, err)
		}
	}
}

func isNotFound(err error) bool {
	var nf interface{ NotFound() bool }
	return errors.As(err, &nf) && nf.NotFound()
}
