// fleetd's access policy: which identities hold which role, and for jobs the tenants they act
// for. A YAML file (deploy/config/policy.yaml is the annotated example):
//
//   grants:                                      # in order; the first that matches applies
//     - identity: spiffe://site/operator/*       # exact, or a prefix ending in '*'
//       role: operator                           # viewer, job, operator or agent
//     - identity: spiffe://site/job/ml-platform
//       role: job
//       tenants: [team-a, team-b]                # a job's tenants; omitted: the last segment
//     - identity: spiffe://site/job/*
//       role: job                                # .../job/team-c acts for tenant team-c
//     - identity: spiffe://site/agent/*
//       role: agent                              # .../agent/server1 is the agent of server1
//     - identity: cn:grafana                     # a certificate with no URI SAN, by its CN
//       role: viewer
//
// An identity no grant matches holds no role: every call but the public ones is refused.
#ifndef FLEET_CONTROLLER_AUTH_POLICY_H_
#define FLEET_CONTROLLER_AUTH_POLICY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/auth/permissions.h"

namespace fleet::auth {

// What an identity holds under the policy.
struct Grant {
  Role role = Role::kViewer;
  std::vector<std::string> tenants;  // Role job: the tenants it acts for, never empty.
  std::string host;                  // Role agent: the only host it may register as.
};

class Policy {
 public:
  // Every unknown key, unknown role, misplaced '*', tenants on a role other than job, and
  // empty identity is reported, "FILE:LINE: ...". An empty file grants nothing.
  static absl::StatusOr<Policy> Parse(absl::string_view text, absl::string_view file_name);
  static absl::StatusOr<Policy> ReadFile(const std::string& path);

  // The grant of the first rule matching `identity`; nullopt when none does, or when the
  // rule takes a tenant or host from an identity whose last path segment is empty.
  std::optional<Grant> Resolve(absl::string_view identity) const;
  size_t size() const { return rules_.size(); }

 private:
  struct Rule {
    std::string identity;  // Without the trailing '*' when `prefix`.
    bool prefix = false;
    Role role = Role::kViewer;
    std::vector<std::string> tenants;
  };
  std::vector<Rule> rules_;
};

// The CA bundle and policy in force, asked by a service at the time of each call for the
// caller it acts for: nothing of it is kept on the caller's connection, so a reload reaches
// connections already open.
class GrantSource {
 public:
  virtual ~GrantSource() = default;
  struct Resolved {
    std::string identity;        // Empty when the certificate does not verify now.
    std::optional<Grant> grant;  // Set only when it holds the permission `method` needs now.
  };
  // The identity of client certificate `leaf_pem` (intermediates in `chain_pem`) and its
  // grant, decided again on the files in force for a call of `method` (a full name,
  // /fleet.v1.Service/Method): a grant whose role lacks the method's permission now is not
  // given, so a call let in under an older policy acts with nothing the newer one refuses.
  // Counts no refusal (the gatekeeper has counted the call). Thread-safe.
  virtual Resolved Resolve(const std::string& method, const std::string& leaf_pem,
                           const std::string& chain_pem) = 0;
};

// The identity fleetd knows a certificate by: its URI SAN when it has exactly one (e.g.
// spiffe://site/job/team-a), else "cn:" and its common name; empty when it has neither or
// several URIs (refused: ambiguous).
std::string IdentityOf(const std::vector<std::string>& uris, const std::string& common_name);

}  // namespace fleet::auth

#endif  // FLEET_CONTROLLER_AUTH_POLICY_H_
