package examallow

import (
	"slices"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func TestFor(t *testing.T) {
	srv := &model.BootServer{Name: "bs1", IP: "10.0.0.1", HTTPURL: "http://Boot.Uni.Example:8080", NFSServer: "nfs.uni.example",
		DHCP: model.DHCPFull, Subnet: "10.0.0.0/24", DNSServers: []string{"10.0.0.53", "10.0.0.1"}}
	ldap := &model.DesktopLogin{Provider: model.LoginKerberos, URIs: []string{"ldaps://LDAP1.uni.example", "ldaps://[2001:db8::389]:6360"},
		SearchBase: "dc=uni,dc=example", Realm: "UNI.EXAMPLE", KDCs: []string{"kdc1.uni.example", "10.1.0.88:8888"}}
	ad := &model.DesktopLogin{Provider: model.LoginAD, Realm: "AD.UNI.EXAMPLE"}
	exam := &model.Exception{Name: "exam-1", Kind: model.ExceptionExam, Allow: []string{"exam.uni.example:443", "10.0.5.0/24", "2001:DB8:5::/48"}}
	site := &model.Site{DesktopLogin: ldap, Printing: &model.Printing{Server: "print.uni.example"}}
	e := func(ep string, why wire.ExamPurpose) wire.ExamEndpoint {
		return wire.ExamEndpoint{Endpoint: ep, For: why}
	}
	for _, tc := range []struct {
		name string
		site *model.Site
		pool *model.Pool
		srv  *model.BootServer
		x    *model.Exception
		want []wire.ExamEndpoint
	}{
		{name: "everything the seat needs, and the exam's", site: site, pool: &model.Pool{Name: "lab-a"}, srv: srv, x: exam, want: []wire.ExamEndpoint{
			e("10.0.0.1", wire.ExamForBootServer),
			e("nfs.uni.example", wire.ExamForBootServer),
			e("boot.uni.example:8080", wire.ExamForSiteManager),
			e("10.0.0.53:53", wire.ExamForDNS),
			e("10.0.0.1:53", wire.ExamForDNS),
			e("ldap1.uni.example:636", wire.ExamForLogin),
			e("[2001:db8::389]:6360", wire.ExamForLogin),
			e("kdc1.uni.example:88", wire.ExamForKDC),
			e("10.1.0.88:8888", wire.ExamForKDC),
			e("print.uni.example:631", wire.ExamForPrint),
			e("exam.uni.example:443", wire.ExamForExam),
			e("10.0.5.0/24", wire.ExamForExam),
			e("2001:db8:5::/48", wire.ExamForExam),
		}},
		{name: "the pool's login and printing; AD found by its domain", site: site,
			pool: &model.Pool{Name: "lab-b", DesktopLogin: ad, Printing: &model.Printing{Server: "[2001:db8::631]:8631"}},
			srv:  &model.BootServer{IP: "10.0.0.1", HTTPURL: "https://10.0.0.2"}, want: []wire.ExamEndpoint{
				e("10.0.0.1", wire.ExamForBootServer),
				e("10.0.0.2:443", wire.ExamForSiteManager),
				e("ad.uni.example:389", wire.ExamForLogin),
				e("ad.uni.example:3268", wire.ExamForLogin),
				e("ad.uni.example:88", wire.ExamForKDC),
				e("[2001:db8::631]:8631", wire.ExamForPrint),
			}},
		{name: "no boot server, no seat, no exception found", site: &model.Site{}, want: []wire.ExamEndpoint{}},
	} {
		got := For(tc.site, tc.pool, tc.srv, tc.x)
		if !slices.Equal(got.Allow, tc.want) {
			t.Errorf("%s:\ngot  %v\nwant %v", tc.name, got.Allow, tc.want)
		}
		if err := got.Check(); err != nil {
			t.Errorf("%s: the agent would refuse it: %v", tc.name, err)
		}
	}
}
